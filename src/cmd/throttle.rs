//! throttle commands (being written).

use super::CommandSpec as C;

/// The throttle commands.
pub static COMMANDS: &[C] = &[];
