//! The bus thread: a one-thread tokio runtime of its own (`sluice-cluster-bus`), so nothing
//! here ever runs on, or waits for, a client event loop. It accepts peers on the bus port,
//! connects to every known node's bus port, reads messages into [`super::state::State::process`], writes
//! each link's queue, and runs Redis's `clusterCron` ten times a second: handshake timeouts,
//! reconnects, a PING to a random node every second and to any node not heard from for half
//! the node timeout, and PFAIL for a node that has not answered a PING within the timeout.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rand::RngExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::msg::{Message, flag, kind};
use super::state::{LINK_QUEUE, Link, LinkId};
use super::{Bus, now_ms};

/// Starts the bus thread.
pub(crate) fn start(bus: Arc<Bus>) -> std::io::Result<std::thread::JoinHandle<()>> {
    let listener = bus.take_listener();
    std::thread::Builder::new()
        .name("sluice-cluster-bus".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!("cluster bus: cannot start its runtime: {e}");
                    return;
                }
            };
            rt.block_on(run(bus, listener));
        })
}

async fn run(bus: Arc<Bus>, listener: Option<std::net::TcpListener>) {
    if let Some(l) = listener.and_then(|l| TcpListener::from_std(l).ok()) {
        let b = bus.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = l.accept().await else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let (link, rx) =
                    register(&b, stream.peer_addr().ok(), stream.local_addr().ok(), None);
                tokio::spawn(serve_link(b.clone(), stream, link, rx));
            }
        });
    }
    let mut iteration: u64 = 0;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    while !bus.stop.load(Ordering::Relaxed) {
        tick.tick().await;
        iteration += 1;
        cron(&bus, iteration);
    }
}

/// Adds a link to the state; for an outbound one, attaches it to its node.
fn register(
    bus: &Bus,
    peer: Option<std::net::SocketAddr>,
    local: Option<std::net::SocketAddr>,
    node: Option<&str>,
) -> (LinkId, mpsc::Receiver<Vec<u8>>) {
    let (tx, rx) = mpsc::channel(LINK_QUEUE);
    let mut st = bus.lock();
    let id = st.new_link_id();
    let link = Link {
        node: node.map(str::to_string),
        inbound: node.is_none(),
        ctime: now_ms(),
        peer_ip: peer
            .map(|a| a.ip().to_canonical().to_string())
            .unwrap_or_default(),
        local_ip: local
            .map(|a| a.ip().to_canonical().to_string())
            .unwrap_or_default(),
        tx,
    };
    st.links.insert(id, link);
    (id, rx)
}

/// Reads a link's messages and writes its queue until either side ends it.
async fn serve_link(
    bus: Arc<Bus>,
    mut stream: TcpStream,
    link: LinkId,
    mut rx: mpsc::Receiver<Vec<u8>>,
) {
    let _ = stream.set_nodelay(true);
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        tokio::select! {
            out = rx.recv() => {
                let Some(bytes) = out else { break };
                if stream.write_all(&bytes).await.is_err() {
                    break;
                }
            }
            n = stream.read(&mut chunk) => {
                let n = match n {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                buf.extend_from_slice(&chunk[..n]);
                if !drain(&bus, link, &mut buf) {
                    break;
                }
            }
        }
    }
    let view = {
        let mut st = bus.lock();
        st.free_link(link);
        bus.after(&mut st)
    };
    bus.publish(view);
}

/// Processes every whole message in `buf`; false when the link is to be closed.
fn drain(bus: &Bus, link: LinkId, buf: &mut Vec<u8>) -> bool {
    let mut at = 0;
    let mut view = None;
    let mut keep = true;
    let inbox;
    {
        let mut st = bus.lock_fresh();
        loop {
            let len = match Message::frame_len(&buf[at..]) {
                Ok(Some(len)) if buf.len() - at >= len => len,
                Ok(_) => break,
                Err(e) => {
                    tracing::debug!("cluster bus: {e}; closing the link");
                    keep = false;
                    break;
                }
            };
            match Message::decode(&buf[at..at + len]) {
                Ok(Some(m)) => st.process(link, m, now_ms()),
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!("cluster bus: {e}; closing the link");
                    keep = false;
                    break;
                }
            }
            at += len;
            if !st.links.contains_key(&link) {
                keep = false;
                break;
            }
        }
        if let Some(v) = bus.after(&mut st) {
            view = Some(v);
        }
        inbox = std::mem::take(&mut st.inbox);
    }
    bus.publish(view);
    bus.deliver(inbox);
    buf.drain(..at);
    keep
}

/// Opens an outbound link to `name` at `ip:cport`, then sends MEET or PING.
async fn connect(bus: Arc<Bus>, name: String, ip: String, cport: u16, timeout: u64) {
    let addr = if ip.contains(':') {
        format!("[{ip}]:{cport}")
    } else {
        format!("{ip}:{cport}")
    };
    let res = tokio::time::timeout(
        Duration::from_millis(timeout.max(100)),
        TcpStream::connect(addr),
    )
    .await;
    let stream = match res {
        Ok(Ok(s)) => s,
        _ => {
            let mut st = bus.lock();
            if let Some(n) = st.nodes.get_mut(&name) {
                n.connecting = false;
                if n.ping_sent == 0 {
                    n.ping_sent = now_ms();
                }
            }
            return;
        }
    };
    let (link, rx) = register(
        &bus,
        stream.peer_addr().ok(),
        stream.local_addr().ok(),
        Some(&name),
    );
    {
        let mut st = bus.lock();
        let now = now_ms();
        let Some(n) = st.nodes.get_mut(&name) else {
            st.free_link(link);
            return;
        };
        n.connecting = false;
        n.link = Some(link);
        let meet = n.is(flag::MEET);
        n.flags &= !flag::MEET;
        let k = if meet { kind::MEET } else { kind::PING };
        if meet && let Some(n) = st.nodes.get_mut(&name) {
            // A MEET is a PING the peer must answer.
            if n.ping_sent == 0 {
                n.ping_sent = now;
            }
        }
        st.send_ping(link, k, now);
    }
    serve_link(bus, stream, link, rx).await;
}

/// Redis's `clusterCron`, one turn.
fn cron(bus: &Arc<Bus>, iteration: u64) {
    let now = now_ms();
    let mut to_connect = Vec::new();
    let view = {
        let mut st = bus.lock_fresh();
        let timeout = st.settings.node_timeout.max(1);
        let handshake_timeout = timeout.max(1000);
        st.blacklist.retain(|_, until| *until > now / 1000);
        let expired: Vec<String> = st
            .nodes
            .values()
            .filter(|n| n.is(flag::HANDSHAKE) && now.saturating_sub(n.ctime) > handshake_timeout)
            .map(|n| n.name.clone())
            .collect();
        for name in expired {
            st.del_node(&name);
        }
        for n in st.nodes.values_mut() {
            if n.is(flag::MYSELF | flag::NOADDR)
                || n.link.is_some()
                || n.connecting
                || n.ip.is_empty()
            {
                continue;
            }
            n.connecting = true;
            to_connect.push((n.name.clone(), n.ip.clone(), n.cport));
        }
        if iteration.is_multiple_of(10) {
            // Ping the node with the oldest pong among five picked at random.
            let candidates: Vec<(String, u64)> = st
                .nodes
                .values()
                .filter(|n| {
                    n.link.is_some() && n.ping_sent == 0 && !n.is(flag::MYSELF | flag::HANDSHAKE)
                })
                .map(|n| (n.name.clone(), n.pong_received))
                .collect();
            let mut rng = rand::rng();
            let picked = (0..5.min(candidates.len()))
                .map(|_| &candidates[rng.random_range(0..candidates.len())])
                .min_by_key(|(_, pong)| *pong)
                .map(|(name, _)| name.clone());
            if let Some(name) = picked
                && let Some(link) = st.nodes.get(&name).and_then(|n| n.link)
            {
                st.send_ping(link, kind::PING, now);
            }
        }
        let names: Vec<String> = st.nodes.keys().cloned().collect();
        for name in names {
            let Some(n) = st.nodes.get(&name) else {
                continue;
            };
            if n.is(flag::MYSELF | flag::NOADDR | flag::HANDSHAKE) {
                continue;
            }
            let (link, ping_sent, pong, data) =
                (n.link, n.ping_sent, n.pong_received, n.data_received);
            if let Some(l) = link {
                let old = st
                    .links
                    .get(&l)
                    .is_some_and(|l| now.saturating_sub(l.ctime) > timeout);
                if old
                    && ping_sent != 0
                    && now.saturating_sub(ping_sent) > timeout / 2
                    && now.saturating_sub(data) > timeout / 2
                {
                    // Connected but silent: reconnect.
                    st.free_link(l);
                } else if ping_sent == 0 && now.saturating_sub(pong) > timeout / 2 {
                    st.send_ping(l, kind::PING, now);
                    continue;
                }
            }
            if ping_sent != 0 {
                let delay = now.saturating_sub(ping_sent).min(now.saturating_sub(data));
                if delay > timeout
                    && let Some(n) = st.nodes.get_mut(&name)
                    && !n.is(flag::PFAIL | flag::FAIL)
                {
                    n.flags |= flag::PFAIL;
                    st.view_changed = true;
                }
            }
        }
        st.manual_failover_cron(now);
        st.handle_replica_failover(now);
        st.replica_migration_cron(now);
        bus.after(&mut st)
    };
    bus.publish(view);
    let timeout = bus.lock().settings.node_timeout;
    for (name, ip, cport) in to_connect {
        tokio::spawn(connect(bus.clone(), name, ip, cport, timeout));
    }
}
