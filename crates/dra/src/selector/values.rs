//! The values a selector evaluates over: the `device` variable built from a
//! [`DeviceView`] as `CompilationResult.DeviceMatches` builds it, and the
//! Kubernetes value types (`kubernetes.Quantity`, `kubernetes.Semver`) as
//! `cel` crate values.

use std::any::Any;
use std::collections::HashMap;
use std::sync::LazyLock;

use cel::ExecutionError;
use cel::common::traits::{Container, Indexer, Iterable, Sizer, Zeroer};
use cel::common::types::{CelBool, CelInt, CelList, CelMap, CelMapKey, CelString, MAP_TYPE, Type};
use cel::common::value::{CowVal, StaticVal, Val};
use k8s_openapi::api::resource::v1::DeviceAttribute;

use super::DeviceView;
use super::quantity::Quantity;
use super::semver::Semver;

pub(crate) static QUANTITY_TYPE: Type = Type::new_struct_type("kubernetes.Quantity");
pub(crate) static SEMVER_TYPE: Type = Type::new_struct_type("kubernetes.Semver");

/// A `kubernetes.Quantity`.
#[derive(Clone, Debug)]
pub(crate) struct QuantityVal {
    pub(crate) quantity: Quantity,
    /// Made by `add` or `sub`. Kubernetes returns those as a pointer
    /// (`*apiservercel.Quantity`), which its `Equal` does not accept as the
    /// right-hand side: `quantity('2') == quantity('1').add(1)` is an error,
    /// `quantity('1').add(1) == quantity('2')` is `true`.
    pub(crate) computed: bool,
}

impl Val for QuantityVal {
    fn get_type(&self) -> &Type {
        &QUANTITY_TYPE
    }

    fn cel_type() -> &'static Type {
        &QUANTITY_TYPE
    }

    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<QuantityVal>()
            .is_some_and(|o| self.quantity.cmp(o.quantity).is_eq())
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for QuantityVal {}

/// A `kubernetes.Semver`.
#[derive(Clone, Debug)]
pub(crate) struct SemverVal(pub(crate) Semver);

impl Val for SemverVal {
    fn get_type(&self) -> &Type {
        &SEMVER_TYPE
    }

    fn cel_type() -> &'static Type {
        &SEMVER_TYPE
    }

    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<SemverVal>()
            .is_some_and(|o| self.0.compare(&o.0).is_eq())
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for SemverVal {}

static EMPTY_MAP: LazyLock<CelMap<'static>> = LazyLock::new(CelMap::default);

/// `device.attributes` and `device.capacity`: maps by domain where a missing
/// domain reads as an empty map (Go's `newStringInterfaceMapWithDefault`),
/// so `device.attributes["other.example.com"].x` fails on `x`, and
/// `has(device.attributes.other)` is true. `in`, `size()`, comprehensions and
/// equality see only the domains present.
#[derive(Clone, Debug)]
pub(crate) struct DomainMap(pub(crate) CelMap<'static>);

impl Val for DomainMap {
    fn get_type(&self) -> &Type {
        &MAP_TYPE
    }

    fn cel_type() -> &'static Type {
        &MAP_TYPE
    }

    fn as_container(&self) -> Option<&dyn Container> {
        Some(&self.0)
    }

    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn as_iterable<'b, 'v>(&'b self) -> Option<&'b (dyn Iterable + 'v)>
    where
        Self: 'v,
    {
        Some(&self.0)
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        Some(&self.0)
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        Some(&self.0)
    }

    fn equals(&self, other: &dyn Val) -> bool {
        self.0.equals(unwrap_domain_map(other))
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for DomainMap {}

impl Indexer for DomainMap {
    fn get<'b, 'v>(&'b self, key: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        match self.0.get(key) {
            Ok(v) => Ok(v),
            Err(_) => Ok(CowVal::Borrowed(&*EMPTY_MAP)),
        }
    }

    fn steal<'v>(self: Box<Self>, key: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(key).map(CowVal::into_owned)
    }
}

/// The plain map behind a [`DomainMap`], or `v` itself.
pub(crate) fn unwrap_domain_map<'b, 'v>(v: &'b (dyn Val + 'v)) -> &'b (dyn Val + 'v) {
    match v.downcast_ref::<DomainMap>() {
        Some(m) => &m.0,
        None => v,
    }
}

/// Why a device cannot be evaluated at all (Go fails every selector on it).
#[derive(Debug)]
pub(crate) struct DeviceError(pub(crate) String);

/// The `device` variable: a map of `driver`, `allowMultipleAllocations`,
/// `attributes` and `capacity`, attribute and capacity names split into
/// domain and id, an unqualified name in the driver's domain.
pub(crate) fn device_value(device: &DeviceView<'_>, read_lists: bool) -> Result<CelMap<'static>, DeviceError> {
    let mut attributes: HashMap<String, HashMap<CelMapKey<'static>, Box<dyn Val>>> = HashMap::new();
    for (name, attr) in device.attributes {
        let value = attribute_value(attr, read_lists).map_err(|e| DeviceError(format!("attribute {name}: {e}")))?;
        let (domain, id) = split_qualified(name, device.driver);
        attributes.entry(domain.to_owned()).or_default().insert(key(id), value);
    }
    let mut capacity: HashMap<String, HashMap<CelMapKey<'static>, Box<dyn Val>>> = HashMap::new();
    for (name, cap) in device.capacity {
        let quantity = Quantity::parse(&cap.value.0).map_err(|e| DeviceError(format!("capacity {name}: {e}")))?;
        let (domain, id) = split_qualified(name, device.driver);
        capacity.entry(domain.to_owned()).or_default().insert(
            key(id),
            Box::new(QuantityVal {
                quantity,
                computed: false,
            }),
        );
    }
    let by_domain = |maps: HashMap<String, HashMap<CelMapKey<'static>, Box<dyn Val>>>| {
        let outer: HashMap<CelMapKey<'static>, Box<dyn Val>> = maps
            .into_iter()
            .map(|(domain, inner)| (key(&domain), Box::new(CelMap::from(inner)) as Box<dyn Val>))
            .collect();
        Box::new(DomainMap(CelMap::from(outer))) as Box<dyn Val>
    };
    let fields: HashMap<CelMapKey<'static>, Box<dyn Val>> = HashMap::from([
        (
            key("driver"),
            Box::new(CelString::from(device.driver.to_owned())) as Box<dyn Val>,
        ),
        (
            key("allowMultipleAllocations"),
            Box::new(CelBool::from(device.allow_multiple_allocations)),
        ),
        (key("attributes"), by_domain(attributes)),
        (key("capacity"), by_domain(capacity)),
    ]);
    Ok(CelMap::from(fields))
}

fn key(s: &str) -> CelMapKey<'static> {
    CelMapKey::String(CelString::from(s.to_owned()))
}

/// Go's `parseQualifiedName`: `domain/id`, or the driver's domain.
fn split_qualified<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

/// The one value an attribute holds, lists first where the release reads
/// them (Go's `getAttributeValue`).
fn attribute_value(attr: &DeviceAttribute, read_lists: bool) -> Result<Box<dyn Val>, String> {
    let version = |v: &str| {
        Semver::parse(v)
            .map(SemverVal)
            .map_err(|e| format!("parse semantic version: {e}"))
    };
    let list = |items: Vec<Box<dyn Val>>| Box::new(CelList::from(items)) as Box<dyn Val>;
    if read_lists {
        if let Some(ints) = &attr.ints {
            return Ok(list(
                ints.iter()
                    .map(|&i| Box::new(CelInt::from(i)) as Box<dyn Val>)
                    .collect(),
            ));
        }
        if let Some(bools) = &attr.bools {
            return Ok(list(
                bools
                    .iter()
                    .map(|&b| Box::new(CelBool::from(b)) as Box<dyn Val>)
                    .collect(),
            ));
        }
        if let Some(strings) = &attr.strings {
            return Ok(list(
                strings
                    .iter()
                    .map(|s| Box::new(CelString::from(s.clone())) as Box<dyn Val>)
                    .collect(),
            ));
        }
        if let Some(versions) = &attr.versions {
            let parsed = versions
                .iter()
                .map(|v| version(v).map(|s| Box::new(s) as Box<dyn Val>))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(list(parsed));
        }
    }
    if let Some(i) = attr.int {
        return Ok(Box::new(CelInt::from(i)));
    }
    if let Some(b) = attr.bool {
        return Ok(Box::new(CelBool::from(b)));
    }
    if let Some(s) = &attr.string {
        return Ok(Box::new(CelString::from(s.clone())));
    }
    if let Some(v) = &attr.version {
        return Ok(Box::new(version(v)?));
    }
    Err("unsupported attribute value".to_owned())
}
