//! CEL device selectors (DeviceClass and request `selectors[].cel.expression`)
//! evaluated as the scheduler evaluates them: the `device` variable (driver,
//! attributes and capacity by domain, allowMultipleAllocations where the
//! release declares it) in the Kubernetes CEL environment of the release.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{DeviceAttribute, DeviceCapacity};

use crate::features::Features;

/// What a selector sees of one device.
#[derive(Clone, Copy, Debug)]
pub struct DeviceView<'a> {
    pub driver: &'a str,
    pub attributes: &'a BTreeMap<String, DeviceAttribute>,
    pub capacity: &'a BTreeMap<String, DeviceCapacity>,
    pub allow_multiple_allocations: bool,
}

/// A selector that failed to compile or to evaluate.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SelectorError {
    #[error("compilation failed: {0}")]
    Compile(String),
    #[error("{0}")]
    Runtime(String),
}

/// A compiled CEL selector.
#[derive(Debug)]
pub struct Selector {
    expression: String,
}

impl Selector {
    pub fn compile(expression: &str, _features: &Features) -> Result<Self, SelectorError> {
        Ok(Self { expression: expression.to_owned() })
    }

    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Does the device satisfy the selector?
    pub fn matches(&self, _device: &DeviceView<'_>) -> Result<bool, SelectorError> {
        Err(SelectorError::Runtime("not implemented".to_owned()))
    }
}
