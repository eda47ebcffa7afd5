//! hash commands (being written).

use super::CommandSpec as C;

/// The hash commands.
pub static COMMANDS: &[C] = &[];
