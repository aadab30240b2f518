//! The live page of a cluster (`topoalign serve`): the fleet and each node
//! — the machine picture `topoalign topology` draws, with each pod's CPUs,
//! memory and devices on it, stranded capacity marked, the pods waiting
//! for a node with the engine's explanation — updated live from the API
//! server (or an input file).
//!
//! - [`model`]: the page model of a `topoalign_cluster::ClusterSnapshot`,
//!   pure;
//! - [`html`]: the page's HTML, style and script (nothing loaded from
//!   elsewhere), pure;
//! - [`input`]: manifests (Nodes, NodeResourceTopology objects, Pods) read
//!   into the objects a live reading returns, pure;
//! - [`server`]: the latest rendering and the HTTP routes (axum; served by
//!   `topoalign-serve` under its listener limits).
//!
//! Must not touch: decisions (the engine's), words (`explain`'s), the
//! drawing (`topoalign-discovery`'s), what is stranded (`topoalign-fleet`'s),
//! reading the API server (`topoalign-cluster`'s).

pub mod html;
pub mod input;
pub mod model;
pub mod server;

pub use input::{InputError, objects_from_manifests};
pub use model::Page;
pub use server::{Live, Rendered, router};
