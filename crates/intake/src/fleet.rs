//! [`read_fleet`]: a fleet file (`simulate`, `nrt --fleet`, `extender
//! --fleet`) and the scenario files its entries name, relative to it.

use std::path::Path;

use topoalign_fleet::Fleet;
use topoalign_model::KubeletVersion;

use crate::{IntakeError, invalid, read_text};

/// Reads the fleet file at `path`; a `scenario:` entry's path is relative
/// to the fleet file's directory. `version` (a command's
/// `--kubelet-version`) names the release of every node that names none.
///
/// # Errors
/// [`IntakeError::Read`] for the file, [`IntakeError::Invalid`] naming the
/// entry and field (or the scenario that cannot be read).
pub fn read_fleet(path: &Path, version: Option<KubeletVersion>) -> Result<Fleet, IntakeError> {
    let text = read_text(path)?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut fleet = Fleet::parse(&text, |scenario| {
        let scenario = base.join(scenario);
        std::fs::read_to_string(&scenario).map_err(|e| format!("cannot read {}: {e}", scenario.display()))
    })
    .map_err(|e| invalid(path, format!("invalid fleet: {e}")))?;
    if let Some(version) = version {
        fleet
            .apply_kubelet_version(version)
            .map_err(|e| invalid(path, format!("invalid fleet with --kubelet-version {version}: {e}")))?;
    }
    Ok(fleet)
}
