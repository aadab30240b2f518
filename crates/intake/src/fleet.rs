//! [`read_fleet`]: a fleet file (`simulate`, `nrt --fleet`, `extender
//! --fleet`) and the scenario files its entries name, relative to it.

use std::path::Path;

use topoalign_fleet::Fleet;

use crate::{IntakeError, invalid, read_text};

/// Reads the fleet file at `path`; a `scenario:` entry's path is relative
/// to the fleet file's directory.
///
/// # Errors
/// [`IntakeError::Read`] for the file, [`IntakeError::Invalid`] naming the
/// entry and field (or the scenario that cannot be read).
pub fn read_fleet(path: &Path) -> Result<Fleet, IntakeError> {
    let text = read_text(path)?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    Fleet::parse(&text, |scenario| {
        let scenario = base.join(scenario);
        std::fs::read_to_string(&scenario).map_err(|e| format!("cannot read {}: {e}", scenario.display()))
    })
    .map_err(|e| invalid(path, format!("invalid fleet: {e}")))
}
