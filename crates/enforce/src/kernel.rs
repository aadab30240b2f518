//! The raw system calls behind the fallback enforcement: CPU affinity
//! (`sched_setaffinity`), memory policy (`set_mempolicy(MPOL_BIND)`), the
//! parent-death signal, and signal dispositions.
//!
//! Owns: building the kernel's bitmasks ([`CpuMask`], [`NodeMask`]) and the
//! calls themselves. Masks are plain `Vec<c_ulong>` sized for the set, not
//! glibc's fixed 1024-CPU `cpu_set_t`, so machines with more CPUs work.
//! Building a mask allocates; applying one does not, so the `apply_*`
//! functions may run between `fork` and `exec` ([`crate::spawn`]).

use std::io;

use libc::c_ulong;
use topoalign_model::CpuSet;

const BITS_PER_WORD: usize = c_ulong::BITS as usize;

/// A CPU affinity mask for `sched_setaffinity`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuMask(Vec<c_ulong>);

impl CpuMask {
    /// The mask of `cpus`: at least 1024 bits (glibc's size, which every
    /// kernel accepts), more when a CPU id needs it.
    pub fn new(cpus: &CpuSet) -> CpuMask {
        let highest = cpus.iter().max().map_or(0, |c| c as usize);
        CpuMask(bits_to_words(cpus.iter().map(|c| c as usize), (highest + 1).max(1024)))
    }

    /// Restricts thread `pid` (0: the calling thread) to the mask's CPUs.
    ///
    /// # Errors
    /// The kernel's error: EINVAL when no CPU of the mask is usable here,
    /// ESRCH for a missing thread, EPERM for another user's thread.
    pub fn apply(&self, pid: u32) -> io::Result<()> {
        let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
        let bytes = self.0.len() * std::mem::size_of::<c_ulong>();
        // SAFETY: the pointer and byte length describe `self.0`, which lives
        // for the whole call; the kernel only reads `bytes` bytes from it.
        let result = unsafe { libc::syscall(libc::SYS_sched_setaffinity, pid, bytes, self.0.as_ptr()) };
        if result == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// A NUMA node mask for `set_mempolicy`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeMask(Vec<c_ulong>);

impl NodeMask {
    /// The mask of `nodes` (at least 64 bits).
    pub fn new(nodes: &[usize]) -> NodeMask {
        let highest = nodes.iter().copied().max().unwrap_or(0);
        NodeMask(bits_to_words(nodes.iter().copied(), (highest + 1).max(BITS_PER_WORD)))
    }

    /// Binds the calling thread's future memory allocations to the mask's
    /// nodes (`MPOL_BIND`); inherited by children and kept across `exec`.
    ///
    /// # Errors
    /// The kernel's error: EINVAL for a node that does not exist or has no
    /// memory.
    pub fn bind_calling_thread(&self) -> io::Result<()> {
        // The kernel reads `maxnode - 1` bits; one more than the mask holds.
        let max_node = (self.0.len() * BITS_PER_WORD + 1) as c_ulong;
        // SAFETY: the pointer describes `self.0`, which outlives the call,
        // and `max_node - 1` bits fit in it; the kernel only reads it.
        let result = unsafe { libc::syscall(libc::SYS_set_mempolicy, libc::MPOL_BIND, self.0.as_ptr(), max_node) };
        if result == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

fn bits_to_words(bits: impl Iterator<Item = usize>, width: usize) -> Vec<c_ulong> {
    let mut words = vec![0 as c_ulong; width.div_ceil(BITS_PER_WORD)];
    for bit in bits {
        words[bit / BITS_PER_WORD] |= 1 << (bit % BITS_PER_WORD);
    }
    words
}

/// Asks the kernel to send `SIGKILL` to the calling process when the
/// thread that created it exits, then checks that `expected_parent` is
/// still the parent (it may have died before the request was made).
///
/// # Errors
/// The `prctl` error, or ESRCH when the parent is already gone.
pub fn die_with_parent(expected_parent: u32) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number and touches no memory.
    let result = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as c_ulong, 0, 0, 0) };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: getppid has no preconditions and cannot fail.
    let parent = unsafe { libc::getppid() };
    if u32::try_from(parent).ok() == Some(expected_parent) {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(libc::ESRCH))
    }
}

/// The signals a terminal sends to a whole process group.
const TERMINAL_SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGQUIT];

/// Ignores `SIGINT` and `SIGQUIT` in the calling process, as `system(3)`
/// does while it waits: Ctrl-C goes to the command, and the launcher stays
/// to release its allocation and report the command's status.
///
/// # Errors
/// The `sigaction` error.
pub fn ignore_terminal_signals() -> io::Result<()> {
    set_disposition(libc::SIG_IGN)
}

/// Restores the default action of the signals [`ignore_terminal_signals`]
/// ignores (ignored dispositions survive `exec`); for a child before `exec`.
///
/// # Errors
/// The `sigaction` error.
pub fn default_terminal_signals() -> io::Result<()> {
    set_disposition(libc::SIG_DFL)
}

fn set_disposition(handler: libc::sighandler_t) -> io::Result<()> {
    for signal in TERMINAL_SIGNALS {
        // SAFETY: SIG_IGN and SIG_DFL are not function pointers, so no
        // handler code can run; `signal` is async-signal-safe.
        let previous = unsafe { libc::signal(signal, handler) };
        if previous == libc::SIG_ERR {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_set_exactly_the_given_bits() {
        let mask = CpuMask::new(&CpuSet::from_iter([0, 2, 65]));
        assert_eq!(mask.0.len() * BITS_PER_WORD, 1024);
        assert_eq!(mask.0[0], 0b101);
        assert_eq!(mask.0[1], 0b10);
        let big = CpuMask::new(&CpuSet::from_iter([2000]));
        assert_eq!(big.0.len() * BITS_PER_WORD, 2048);
        assert_eq!(NodeMask::new(&[0, 3]).0, vec![0b1001]);
        assert_eq!(NodeMask::new(&[64]).0, vec![0, 1]);
    }

    #[test]
    fn an_impossible_affinity_is_refused_by_the_kernel() {
        // CPU 4000 exists on no test machine: EINVAL, and nothing changes.
        let error = CpuMask::new(&CpuSet::from_iter([4000])).apply(0);
        assert_eq!(error.err().and_then(|e| e.raw_os_error()), Some(libc::EINVAL));
    }
}
