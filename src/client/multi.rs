//! A client's MULTI queue: the commands queued since MULTI, kept until EXEC or DISCARD.
//!
//! A command's arguments are borrowed from the connection's read buffer while it is queued,
//! so the queue copies them, end to end, into one byte buffer of its own and remembers where
//! each argument ends. EXEC borrows them back once ([`MultiQueue::lend`]): one vector of
//! slices for the whole transaction, each command's arguments a sub-slice of it. Nothing is
//! reference-counted and, once the buffers have grown, nothing is allocated per command (an
//! emptied small queue is kept for the next MULTI: [`MultiQueue::worth_keeping`]).

use smallvec::SmallVec;

/// The commands of one transaction: each one's command table entry and arguments.
#[derive(Debug, Clone, Default)]
pub(crate) struct MultiQueue {
    /// Every queued argument (names included), end to end.
    bytes: Vec<u8>,
    /// Where each argument ends in `bytes` (it starts where the one before ends).
    arg_ends: Vec<usize>,
    /// Each command: its table entry's index (`engine::CmdId`) and where its arguments end
    /// in `arg_ends`.
    commands: Vec<(u32, usize)>,
}

/// A kept queue's buffers stay at most this large (bytes of arguments)…
const KEPT_BYTES_MAX: usize = 16 * 1024;
/// …and hold at most this many commands.
const KEPT_COMMANDS_MAX: usize = 64;

impl MultiQueue {
    /// How many commands are queued.
    pub(crate) fn len(&self) -> usize {
        self.commands.len()
    }

    /// Queues a command: its table entry's index and its arguments, name first (copied).
    pub(crate) fn push(&mut self, cmd: u32, args: &[&[u8]]) {
        if self.bytes.capacity() == 0 {
            // A rate limiter's whole transaction fits; later ones reuse it.
            self.bytes.reserve(512);
            self.arg_ends.reserve(16);
        }
        for arg in args {
            self.bytes.extend_from_slice(arg);
            self.arg_ends.push(self.bytes.len());
        }
        self.commands.push((cmd, self.arg_ends.len()));
    }

    /// The queued commands' table entry indexes, in order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.commands.iter().map(|&(cmd, _)| cmd)
    }

    /// Every queued command with its arguments, borrowed: built once per use (EXEC's), with
    /// no allocation for a transaction of up to 24 arguments in all.
    pub(crate) fn lend(&self) -> Lent<'_> {
        // (`extend` from an exact-size iterator: one capacity check, not one per argument.)
        let mut start = 0;
        let args = self
            .arg_ends
            .iter()
            .map(|&end| {
                let arg = self.bytes.get(start..end).unwrap_or(&[]);
                start = end;
                arg
            })
            .collect();
        Lent {
            args,
            commands: &self.commands,
        }
    }

    /// Empties the queue, keeping its buffers.
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.arg_ends.clear();
        self.commands.clear();
    }

    /// True if the emptied queue is small enough to keep for the connection's next MULTI
    /// (a large transaction's memory goes with it).
    pub(crate) fn worth_keeping(&self) -> bool {
        self.bytes.capacity() <= KEPT_BYTES_MAX && self.commands.capacity() <= KEPT_COMMANDS_MAX
    }
}

/// A queue's commands with their arguments borrowed ([`MultiQueue::lend`]).
#[derive(Debug)]
pub(crate) struct Lent<'q> {
    args: SmallVec<[&'q [u8]; 24]>,
    commands: &'q [(u32, usize)],
}

impl<'q> Lent<'q> {
    /// Each command's table entry index and its arguments (name first), in queue order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &[&'q [u8]])> + '_ {
        let mut start = 0;
        self.commands.iter().map(move |&(cmd, end)| {
            let args = self.args.get(start..end).unwrap_or(&[]);
            start = end;
            (cmd, args)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::MultiQueue;

    /// Commands come back in order with their own arguments, empty ones included; a cleared
    /// queue is empty and reusable; a large one is not kept.
    #[test]
    fn commands_come_back_with_their_arguments() {
        let mut q = MultiQueue::default();
        assert!(q.len() == 0 && q.lend().iter().next().is_none());
        q.push(7, &[b"ZADD", b"k", b"1", b"m"]);
        q.push(3, &[b"ZCARD", b""]);
        q.push(9, &[b"PING"]);
        assert_eq!(q.len(), 3);
        assert_eq!(q.ids().collect::<Vec<_>>(), [7, 3, 9]);
        let lent = q.lend();
        let got: Vec<(u32, Vec<&[u8]>)> = lent.iter().map(|(c, a)| (c, a.to_vec())).collect();
        let want: Vec<(u32, Vec<&[u8]>)> = vec![
            (7, vec![b"ZADD", b"k", b"1", b"m"]),
            (3, vec![b"ZCARD", b""]),
            (9, vec![b"PING"]),
        ];
        assert_eq!(got, want);
        drop(lent);
        let copy = q.clone();
        q.clear();
        assert!(q.len() == 0 && q.worth_keeping());
        q.push(1, &[b"GET", b"x"]);
        assert_eq!(
            q.lend()
                .iter()
                .map(|(c, a)| (c, a.to_vec()))
                .collect::<Vec<_>>(),
            [(1, vec![&b"GET"[..], b"x"])]
        );
        assert_eq!(copy.len(), 3);
        let big = vec![b'v'; 20_000];
        q.push(2, &[b"SET", b"k", &big]);
        assert!(!q.worth_keeping());
    }
}
