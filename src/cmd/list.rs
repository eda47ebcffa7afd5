//! list commands (being written).

use super::CommandSpec as C;

/// The list commands.
pub static COMMANDS: &[C] = &[];
