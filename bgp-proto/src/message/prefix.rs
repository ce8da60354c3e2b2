//! NLRI prefix encoding (RFC 4271 §4.3, RFC 4760 §5): a length octet and the minimum number
//! of address octets. Decoded prefixes are canonical (host bits cleared).

use std::net::{Ipv4Addr, Ipv6Addr};

use bytes::{BufMut, BytesMut};
use ipnet::{Ipv4Net, Ipv6Net};

pub(crate) fn encoded_len(prefix_len: u8) -> usize {
    1 + usize::from(prefix_len).div_ceil(8)
}

/// One encoded prefix split off the front of a field.
struct Split<'a> {
    len: u8,
    /// The address octets (`len` bits rounded up).
    octets: &'a [u8],
    /// Everything after the length octet, so callers can load a whole address at once.
    tail: &'a [u8],
    rest: &'a [u8],
}

#[inline]
fn split_prefix(bytes: &[u8], max_len: u8) -> Result<Split<'_>, &'static str> {
    let (&len, tail) = bytes.split_first().ok_or("truncated prefix length")?;
    if len > max_len {
        return Err("prefix length exceeds the address size");
    }
    let (octets, rest) = tail
        .split_at_checked(usize::from(len).div_ceil(8))
        .ok_or("prefix runs past the end of the field")?;
    Ok(Split {
        len,
        octets,
        tail,
        rest,
    })
}

/// The address as big-endian bytes, zero-padded.
#[inline]
fn padded<const N: usize>(octets: &[u8]) -> [u8; N] {
    let mut addr = [0u8; N];
    for (dst, src) in addr.iter_mut().zip(octets) {
        *dst = *src;
    }
    addr
}

pub(crate) fn decode_v4(mut bytes: &[u8]) -> Result<Vec<Ipv4Net>, &'static str> {
    // Typical prefixes (/17../32) take 4-5 octets; the capacity never exceeds the input size.
    let mut out = Vec::with_capacity(bytes.len() / 4 + 1);
    while !bytes.is_empty() {
        let Split {
            len,
            octets,
            tail,
            rest,
        } = split_prefix(bytes, 32)?;
        // Fast path: one 4-octet load; octets past the prefix belong to the next one and are
        // cleared by the mask, as are host bits (canonical, like `trunc()`).
        let raw = match tail.first_chunk::<4>() {
            Some(window) => u32::from_be_bytes(*window),
            None => u32::from_be_bytes(padded(octets)),
        };
        let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
        let net = Ipv4Net::new(Ipv4Addr::from(raw & mask), len);
        out.push(net.map_err(|_| "bad IPv4 prefix length")?);
        bytes = rest;
    }
    Ok(out)
}

pub(crate) fn decode_v6(mut bytes: &[u8]) -> Result<Vec<Ipv6Net>, &'static str> {
    let mut out = Vec::with_capacity(bytes.len() / 9 + 1);
    while !bytes.is_empty() {
        let Split {
            len,
            octets,
            tail,
            rest,
        } = split_prefix(bytes, 128)?;
        let raw = match tail.first_chunk::<16>() {
            Some(window) => u128::from_be_bytes(*window),
            None => u128::from_be_bytes(padded(octets)),
        };
        let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        let net = Ipv6Net::new(Ipv6Addr::from(raw & mask), len);
        out.push(net.map_err(|_| "bad IPv6 prefix length")?);
        bytes = rest;
    }
    Ok(out)
}

pub(crate) fn encode_v4(dst: &mut BytesMut, net: &Ipv4Net) {
    let len = net.prefix_len();
    let [a, b, c, d] = net.network().octets();
    // One copy per prefix: length octet and address octets from one stack buffer.
    let buf = [len, a, b, c, d];
    dst.put_slice(buf.get(..encoded_len(len)).unwrap_or(&buf));
}

pub(crate) fn encode_v6(dst: &mut BytesMut, net: &Ipv6Net) {
    let len = net.prefix_len();
    let mut buf = [0u8; 17];
    let [first, addr @ ..] = &mut buf;
    *first = len;
    *addr = net.network().octets();
    dst.put_slice(buf.get(..encoded_len(len)).unwrap_or(&buf));
}

/// Encodes every prefix after one reservation (no growth checks per prefix).
pub(crate) fn encode_all_v4(dst: &mut BytesMut, nets: &[Ipv4Net]) {
    dst.reserve(nets.iter().map(|n| encoded_len(n.prefix_len())).sum());
    nets.iter().for_each(|n| encode_v4(dst, n));
}

/// As [`encode_all_v4`] for IPv6.
pub(crate) fn encode_all_v6(dst: &mut BytesMut, nets: &[Ipv6Net]) {
    dst.reserve(nets.iter().map(|n| encoded_len(n.prefix_len())).sum());
    nets.iter().for_each(|n| encode_v6(dst, n));
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
    fn whole_word_loads_do_not_leak_the_next_prefix() {
        // 10/8 is read with a 4-octet window that covers the next prefix's octets.
        let v = decode_v4(&[8, 10, 24, 192, 168, 1, 0, 32, 1, 2, 3, 4]).unwrap();
        let want: Vec<Ipv4Net> = ["10.0.0.0/8", "192.168.1.0/24", "0.0.0.0/0", "1.2.3.4/32"]
            .iter()
            .map(|p| p.parse().unwrap())
            .collect();
        assert_eq!(v, want);
        let v = decode_v6(&[16, 0xfd, 0, 64, 0x20, 1, 0xd, 0xb8, 0, 0, 0, 1]).unwrap();
        let want: Vec<Ipv6Net> = ["fd00::/16", "2001:db8:0:1::/64"]
            .iter()
            .map(|p| p.parse().unwrap())
            .collect();
        assert_eq!(v, want);
        assert!(decode_v4(&[24, 10, 1]).is_err(), "truncated");
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
