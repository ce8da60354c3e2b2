//! Checked big-endian reads over a byte slice. Every read returns `Err(Truncated)` instead of
//! panicking, so decoders are panic-free by construction.

use std::net::{Ipv4Addr, Ipv6Addr};

/// The input ended before a field did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Truncated;

#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], Truncated> {
        if n > self.buf.len() {
            return Err(Truncated);
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    pub(crate) fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], Truncated> {
        let bytes = self.take(N)?;
        <[u8; N]>::try_from(bytes).map_err(|_| Truncated)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, Truncated> {
        Ok(u8::from_be_bytes(self.array()?))
    }

    pub(crate) fn u16(&mut self) -> Result<u16, Truncated> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, Truncated> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    pub(crate) fn ipv4(&mut self) -> Result<Ipv4Addr, Truncated> {
        Ok(Ipv4Addr::from(self.array::<4>()?))
    }

    pub(crate) fn ipv6(&mut self) -> Result<Ipv6Addr, Truncated> {
        Ok(Ipv6Addr::from(self.array::<16>()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_past_end_are_errors_not_panics() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.u16(), Ok(0x0102));
        assert_eq!(r.u16(), Err(Truncated));
        assert_eq!(r.u8(), Ok(3));
        assert_eq!(r.u8(), Err(Truncated));
        assert!(r.is_empty());
    }
}
