//! A small blocking HTTP/1.1 client for the agent's API, over the Unix
//! socket or TCP (with the bearer token): what `topoalign run`, the tests
//! and the benchmark use. One request per connection (`Connection:
//! close`), so there is no connection state to get wrong.
//!
//! Owns: request framing, response parsing (`Content-Length`, chunked, or
//! to end of stream), and turning error answers into [`ClientError`]s that
//! carry the agent's own message.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::wire::{AdmitResponse, Allocation, ErrorBody, Health, Released, Topology};

/// Where the agent listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Unix(PathBuf),
    Tcp { address: String, token: Option<String> },
}

/// A failed call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The agent could not be reached or the connection broke.
    #[error("cannot talk to the agent at {endpoint}: {source}")]
    Connect {
        endpoint: String,
        #[source]
        source: io::Error,
    },
    /// The agent answered with an error status; `message` is its text.
    #[error("the agent answered {status}: {message}")]
    Status { status: u16, message: String },
    /// The answer was not what the API documents.
    #[error("unexpected answer from the agent: {0}")]
    Protocol(String),
}

/// A raw answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Response {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A client for one agent.
#[derive(Clone, Debug)]
pub struct Client {
    endpoint: Endpoint,
    timeout: Duration,
}

trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

impl Client {
    /// A client with a 60-second timeout per read or write.
    pub fn new(endpoint: Endpoint) -> Client {
        Client {
            endpoint,
            timeout: Duration::from_secs(60),
        }
    }

    fn describe(&self) -> String {
        match &self.endpoint {
            Endpoint::Unix(path) => path.display().to_string(),
            Endpoint::Tcp { address, .. } => address.clone(),
        }
    }

    fn connect(&self) -> io::Result<Box<dyn Stream>> {
        Ok(match &self.endpoint {
            Endpoint::Unix(path) => {
                let stream = UnixStream::connect(path)?;
                stream.set_read_timeout(Some(self.timeout))?;
                stream.set_write_timeout(Some(self.timeout))?;
                Box::new(stream)
            }
            Endpoint::Tcp { address, .. } => {
                let stream = TcpStream::connect(address)?;
                stream.set_read_timeout(Some(self.timeout))?;
                stream.set_write_timeout(Some(self.timeout))?;
                Box::new(stream)
            }
        })
    }

    /// Sends one request and reads the whole answer, whatever its status.
    ///
    /// # Errors
    /// [`ClientError::Connect`] and [`ClientError::Protocol`].
    pub fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<(&str, &[u8])>,
        headers: &[(&str, &str)],
    ) -> Result<Response, ClientError> {
        let connect_error = |source| ClientError::Connect {
            endpoint: self.describe(),
            source,
        };
        let mut stream = self.connect().map_err(connect_error)?;
        let mut request = format!("{method} {path} HTTP/1.1\r\nHost: topoalign\r\nConnection: close\r\n");
        if let Endpoint::Tcp { token: Some(token), .. } = &self.endpoint {
            request.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        let body = body.unwrap_or(("application/json", b""));
        if method != "GET" {
            request.push_str(&format!(
                "Content-Type: {}\r\nContent-Length: {}\r\n",
                body.0,
                body.1.len()
            ));
        }
        request.push_str("\r\n");
        let written = stream
            .write_all(request.as_bytes())
            .and_then(|()| stream.write_all(body.1))
            .and_then(|()| stream.flush());
        if let Err(error) = written {
            // The agent may answer and close before reading everything
            // (413 for a body over the limit): its answer is still there.
            if matches!(error.kind(), io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset)
                && let Ok(response) = read_response(&mut stream)
            {
                return Ok(response);
            }
            return Err(connect_error(error));
        }
        read_response(stream).map_err(|e| match e.kind() {
            io::ErrorKind::InvalidData => ClientError::Protocol(e.to_string()),
            _ => connect_error(e),
        })
    }

    /// A request whose success answer is JSON `T`; error statuses become
    /// [`ClientError::Status`] with the agent's message.
    ///
    /// # Errors
    /// [`ClientError`].
    pub fn call<T: DeserializeOwned>(&self, method: &str, path: &str, body: Option<&[u8]>) -> Result<T, ClientError> {
        let response = self.send(method, path, body.map(|b| ("application/json", b)), &[])?;
        if !(200..300).contains(&response.status) {
            return Err(status_error(&response));
        }
        serde_json::from_slice(&response.body).map_err(|e| ClientError::Protocol(format!("{e}: {}", response.text())))
    }

    /// `POST /v1/allocations`: admitted or rejected (both are answers);
    /// other errors are [`ClientError::Status`].
    ///
    /// # Errors
    /// [`ClientError`].
    pub fn admit(&self, body: &serde_json::Value) -> Result<AdmitResponse, ClientError> {
        let bytes = serde_json::to_vec(body).map_err(|e| ClientError::Protocol(e.to_string()))?;
        let response = self.send("POST", "/v1/allocations", Some(("application/json", &bytes)), &[])?;
        match response.status {
            201 | 409 => match serde_json::from_slice::<AdmitResponse>(&response.body) {
                Ok(answer) => Ok(answer),
                // A 409 for a clashing name carries a plain error.
                Err(_) => Err(status_error(&response)),
            },
            _ => Err(status_error(&response)),
        }
    }

    /// `DELETE /v1/allocations/{id}`.
    ///
    /// # Errors
    /// [`ClientError`]; 404 when it is not held.
    pub fn release(&self, id: &str) -> Result<Allocation, ClientError> {
        self.call("DELETE", &format!("/v1/allocations/{id}"), None)
    }

    /// `GET /v1/allocations`.
    ///
    /// # Errors
    /// [`ClientError`].
    pub fn allocations(&self) -> Result<Vec<Allocation>, ClientError> {
        self.call("GET", "/v1/allocations", None)
    }

    /// `GET /v1/topology`.
    ///
    /// # Errors
    /// [`ClientError`].
    pub fn topology(&self) -> Result<Topology, ClientError> {
        self.call("GET", "/v1/topology", None)
    }

    /// `GET /healthz`.
    ///
    /// # Errors
    /// [`ClientError`].
    pub fn health(&self) -> Result<Health, ClientError> {
        self.call("GET", "/healthz", None)
    }

    /// `POST /v1/reconcile`.
    ///
    /// # Errors
    /// [`ClientError`].
    pub fn reconcile(&self) -> Result<Vec<Released>, ClientError> {
        self.call("POST", "/v1/reconcile", Some(b""))
    }
}

fn status_error(response: &Response) -> ClientError {
    let message = serde_json::from_slice::<ErrorBody>(&response.body)
        .map(|e| e.error)
        .unwrap_or_else(|_| response.text());
    ClientError::Status {
        status: response.status,
        message,
    }
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

fn read_response(stream: impl Read) -> io::Result<Response> {
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line)?;
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| invalid(format!("bad status line {status_line:?}")))?;
    let mut length = None;
    let mut chunked = false;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(invalid("the answer ended inside its headers"));
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(value.parse::<usize>().map_err(|_| invalid("bad Content-Length"))?);
            } else if name.eq_ignore_ascii_case("transfer-encoding") && value.eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size_line = String::new();
            reader.read_line(&mut size_line)?;
            let size_text = size_line.trim().split(';').next().unwrap_or_default();
            let size = usize::from_str_radix(size_text, 16).map_err(|_| invalid("bad chunk size"))?;
            if size == 0 {
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            reader.read_exact(&mut body[start..])?;
            let mut crlf = [0u8; 2];
            reader.read_exact(&mut crlf)?;
        }
    } else if let Some(length) = length {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    } else {
        reader.read_to_end(&mut body)?;
    }
    Ok(Response { status, body })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_parse_in_every_framing() -> io::Result<()> {
        for (raw, status, body) in [
            ("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello", 200, "hello"),
            (
                "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\n\r\n",
                201,
                "hello",
            ),
            (
                "HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\nto the end",
                404,
                "to the end",
            ),
        ] {
            let response = read_response(raw.as_bytes())?;
            assert_eq!((response.status, response.text().as_str()), (status, body));
        }
        assert!(read_response("garbage".as_bytes()).is_err());
        assert!(read_response("HTTP/1.1 200 OK\r\ncontent-length: 9\r\n".as_bytes()).is_err());
        Ok(())
    }
}
