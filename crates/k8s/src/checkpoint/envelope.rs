//! The envelope around a CPU or memory checkpoint's content, in every
//! layout: the struct `checksum` of v1.32–v1.36, and v1.37's `data` (the
//! content as a JSON string) with its authoritative `dataChecksum`. The
//! CPU and memory checkpoints say what their content is
//! ([`Enveloped`]); reading the data layer, sealing fresh content and
//! closing a file with its checksums are done here, once.

use std::borrow::Cow;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use super::CheckpointError;
use super::go_json::{self, Writer};
use super::spew::{fnv32a, fnv32a_more};
use crate::text::Text;

/// A checkpoint whose content sits in the envelope.
pub(crate) trait Enveloped: Sized {
    /// The checkpoint struct's Go name (`state.CPUManagerCheckpoint`).
    const GO_STRUCT: &'static str;
    /// How the kubelet names the content when the payload does not decode
    /// (`cpu manager`).
    const WHAT: &'static str;
    /// The first layout with `data` (CPU 4, memory 3).
    const DATA_VERSION: u8;

    /// Decodes the content's fields (the file, or the `data` payload).
    fn decode(value: &Value) -> Result<Self, CheckpointError>;
    /// Decodes the `data` payload as a kubelet writes it straight into the
    /// checkpoint, without the generic tree: `Some` only where
    /// [`Enveloped::decode`] of the payload's tree gives the same
    /// checkpoint; `None` for anything else (a `null`, a missing field, a
    /// name in another case, a member it does not know), left to `decode`.
    fn decode_direct(data: &str) -> Option<Self>;
    /// The struct checksum of the checkpoint's own layout.
    fn struct_checksum(&self) -> u32;
    /// The content as the `data` payload's JSON.
    fn data_json(&self) -> String;
    /// Which layout the checkpoint is in.
    fn version(&self) -> u8;
    /// The envelope's fields to set: version, stored checksum, `data`.
    fn envelope_mut(&mut self) -> (&mut u8, &mut u64, &mut Option<String>);
}

/// Reads a file of the data layout: its payload decoded, with the
/// layout's version, the stored data checksum and the data string set;
/// `None` when neither `data` nor `dataChecksum` is set (an older layout:
/// the kubelet then falls back to it). A set but mismatching pair is
/// [`CheckpointError::Corrupt`], never a fallback — the kubelet's rule too.
pub(crate) fn read_data_layer<T: Enveloped>(value: &Value) -> Result<Option<T>, CheckpointError> {
    let go_struct = T::GO_STRUCT;
    let Some(object) = go_json::top_object(value, go_struct)? else {
        return Ok(None);
    };
    let at = |path| go_json::At { go_struct, path };
    let data = go_json::string(go_json::field(object, "data"), at("data"))?;
    let stored = go_json::uint64(go_json::field(object, "dataChecksum"), at("dataChecksum"))?;
    if data.is_empty() && stored == 0 {
        return Ok(None);
    }
    verify_checksum(stored, data_checksum(&data))?;
    let payload = go_json::parse(data.as_bytes()).map_err(|error| {
        CheckpointError::Decode(format!("failed to deserialize {} checkpoint data: {error}", T::WHAT))
    })?;
    let mut checkpoint = T::decode(&payload)?;
    let (version, checksum, data_field) = checkpoint.envelope_mut();
    *version = T::DATA_VERSION;
    *checksum = stored;
    *data_field = Some(data);
    Ok(Some(checkpoint))
}

/// The checksum of the content, computed the kubelet's way for its
/// layout: the data checksum where there is `data`, else `struct_checksum`.
pub(crate) fn computed_checksum(data: Option<&str>, struct_checksum: impl FnOnce() -> u32) -> u32 {
    data.map_or_else(struct_checksum, data_checksum)
}

/// Seals freshly made content as its layout's kubelet would: the `data`
/// string in the data layout, then the authoritative checksum.
pub(crate) fn seal<T: Enveloped>(mut checkpoint: T, computed: impl Fn(&T) -> u32) -> T {
    let data = (checkpoint.version() >= T::DATA_VERSION).then(|| checkpoint.data_json());
    *checkpoint.envelope_mut().2 = data;
    let sum = u64::from(computed(&checkpoint));
    *checkpoint.envelope_mut().1 = sum;
    checkpoint
}

/// Ends a file whose content members `json` holds: `checksum` (the
/// layout's struct checksum), in the data layout `data` made afresh and
/// `dataChecksum`, and the closing brace.
pub(crate) fn close<T: Enveloped>(checkpoint: &T, mut json: Writer) -> Vec<u8> {
    json.key("checksum").number(checkpoint.struct_checksum());
    if checkpoint.version() >= T::DATA_VERSION {
        let data = checkpoint.data_json();
        json.key("data").string(&data);
        json.key("dataChecksum").number(data_checksum(&data));
    }
    json.raw("}");
    json.into_string().into_bytes()
}

/// `checksum.Verify`: the stored checksum must be the content's.
pub(crate) fn verify_checksum(stored: u64, computed: u32) -> Result<(), CheckpointError> {
    let computed = u64::from(computed);
    if computed == stored {
        Ok(())
    } else {
        Err(CheckpointError::Corrupt { stored, computed })
    }
}

/// `checksum.New(data)` for a string.
pub(crate) fn data_checksum(data: &str) -> u32 {
    fnv32a_more(fnv32a(b"(string)"), data.as_bytes())
}

/// [`read_data_layer`] of the file `bytes` without the generic tree, for
/// the file a kubelet writes: JSON whose top level is an object holding
/// `data` (a non-empty string) and `dataChecksum` (an unsigned integer),
/// each once and spelled exactly, the data checksum verifying and the
/// payload read by [`Enveloped::decode_direct`]. `None` for anything else
/// — an older layout, a damaged or unusual file — which the general
/// reading then reads: it decides every error and every file this does
/// not take, and where this takes a file the two give the same checkpoint
/// (`crate::checkpoint::tests` hold them together).
pub(crate) fn read_data_layer_direct<T: Enveloped>(bytes: &[u8]) -> Option<T> {
    let envelope: DataEnvelope<'_> = serde_json::from_slice(bytes).ok()?;
    let (data, stored) = (envelope.data?, envelope.checksum?);
    if data.is_empty() || u64::from(data_checksum(&data)) != stored {
        return None;
    }
    let mut checkpoint = T::decode_direct(&data)?;
    let (version, checksum, data_field) = checkpoint.envelope_mut();
    *version = T::DATA_VERSION;
    *checksum = stored;
    *data_field = Some(data.into_owned());
    Some(checkpoint)
}

/// The data layout's envelope: `data` and `dataChecksum`; every other
/// member (the older layout's fields, kept for older kubelets) is checked
/// as JSON and not read, as the general reading does not read them. A
/// member that is `data` or `dataChecksum` in another case, or either one
/// twice, is refused (the general reading matches names as Go does).
struct DataEnvelope<'a> {
    data: Option<Cow<'a, str>>,
    checksum: Option<u64>,
}

impl<'de> Deserialize<'de> for DataEnvelope<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EnvelopeVisitor;
        impl<'de> Visitor<'de> for EnvelopeVisitor {
            type Value = DataEnvelope<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a checkpoint object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DataEnvelope<'de>, A::Error> {
                let mut envelope = DataEnvelope {
                    data: None,
                    checksum: None,
                };
                while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
                    match key.as_ref() {
                        "data" if envelope.data.is_none() => envelope.data = Some(map.next_value::<Text<'de>>()?.0),
                        "dataChecksum" if envelope.checksum.is_none() => envelope.checksum = Some(map.next_value()?),
                        key if key.eq_ignore_ascii_case("data") || key.eq_ignore_ascii_case("dataChecksum") => {
                            return Err(de::Error::custom("not the data layout as a kubelet writes it"));
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(envelope)
            }
        }
        deserializer.deserialize_map(EnvelopeVisitor)
    }
}
