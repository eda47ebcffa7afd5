//! set commands (being written).

use super::CommandSpec as C;

/// The set commands.
pub static COMMANDS: &[C] = &[];
