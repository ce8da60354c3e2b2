//! NLRI prefix encoding (RFC 4271 §4.3, RFC 4760 §5): a length octet and the minimum number
//! of address octets. Decoded prefixes are canonical (host bits cleared).

use std::net::{Ipv4Addr, Ipv6Addr};

use bytes::{BufMut, BytesMut};
use ipnet::{Ipv4Net, Ipv6Net};

use crate::reader::Reader;

pub(crate) fn encoded_len(prefix_len: u8) -> usize {
    1 + usize::from(prefix_len).div_ceil(8)
}

fn read_prefix<const N: usize>(r: &mut Reader<'_>) -> Result<([u8; N], u8), &'static str> {
    let len = r.u8().map_err(|_| "truncated prefix length")?;
    if usize::from(len) > N * 8 {
        return Err("prefix length exceeds the address size");
    }
    let bytes = r
        .take(usize::from(len).div_ceil(8))
        .map_err(|_| "prefix runs past the end of the field")?;
    let mut addr = [0u8; N];
    for (dst, src) in addr.iter_mut().zip(bytes) {
        *dst = *src;
    }
    Ok((addr, len))
}

pub(crate) fn decode_v4(bytes: &[u8]) -> Result<Vec<Ipv4Net>, &'static str> {
    let mut r = Reader::new(bytes);
    // Each prefix takes at least one octet; this bounds the allocation by the input.
    let mut out = Vec::with_capacity(bytes.len().min(1024));
    while !r.is_empty() {
        let (addr, len) = read_prefix::<4>(&mut r)?;
        let net = Ipv4Net::new(Ipv4Addr::from(addr), len).map_err(|_| "bad IPv4 prefix length")?;
        out.push(net.trunc());
    }
    Ok(out)
}

pub(crate) fn decode_v6(bytes: &[u8]) -> Result<Vec<Ipv6Net>, &'static str> {
    let mut r = Reader::new(bytes);
    let mut out = Vec::with_capacity(bytes.len().min(1024));
    while !r.is_empty() {
        let (addr, len) = read_prefix::<16>(&mut r)?;
        let net = Ipv6Net::new(Ipv6Addr::from(addr), len).map_err(|_| "bad IPv6 prefix length")?;
        out.push(net.trunc());
    }
    Ok(out)
}

pub(crate) fn encode_v4(dst: &mut BytesMut, net: &Ipv4Net) {
    let len = net.prefix_len();
    dst.put_u8(len);
    let octets = net.network().octets();
    dst.put_slice(
        octets
            .get(..usize::from(len).div_ceil(8))
            .unwrap_or(&octets),
    );
}

pub(crate) fn encode_v6(dst: &mut BytesMut, net: &Ipv6Net) {
    let len = net.prefix_len();
    dst.put_u8(len);
    let octets = net.network().octets();
    dst.put_slice(
        octets
            .get(..usize::from(len).div_ceil(8))
            .unwrap_or(&octets),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_bits_are_cleared_on_decode() {
        // 10.1.2.3/24 on the wire decodes as 10.1.2.0/24.
        let v = decode_v4(&[24, 10, 1, 2]).unwrap();
        assert_eq!(v, vec!["10.1.2.0/24".parse().unwrap()]);
        let v = decode_v4(&[23, 10, 1, 3]).unwrap();
        assert_eq!(v, vec!["10.1.2.0/23".parse().unwrap()]);
    }

    #[test]
    fn prefix_longer_than_address_is_rejected() {
        assert!(decode_v4(&[33, 1, 2, 3, 4, 5]).is_err());
        assert!(decode_v6(&[129]).is_err());
    }

    #[test]
    fn default_route_encodes_as_one_octet() {
        let mut b = BytesMut::new();
        encode_v4(&mut b, &"0.0.0.0/0".parse().unwrap());
        assert_eq!(&b[..], &[0]);
        assert_eq!(encoded_len(0), 1);
        assert_eq!(encoded_len(26), 5);
    }
}
