//! IANA code points used on the wire, in one place.
//!
//! Registries: <https://www.iana.org/assignments/bgp-parameters>,
//! <https://www.iana.org/assignments/capability-codes>,
//! <https://www.iana.org/assignments/address-family-numbers>,
//! <https://www.iana.org/assignments/safi-namespace>.

/// BGP message types (RFC 4271 §4.1, RFC 2918).
pub mod msg_type {
    pub const OPEN: u8 = 1;
    pub const UPDATE: u8 = 2;
    pub const NOTIFICATION: u8 = 3;
    pub const KEEPALIVE: u8 = 4;
    pub const ROUTE_REFRESH: u8 = 5;
}

/// Path attribute type codes (BGP Path Attributes registry).
pub mod attr_type {
    pub const ORIGIN: u8 = 1;
    pub const AS_PATH: u8 = 2;
    pub const NEXT_HOP: u8 = 3;
    pub const MULTI_EXIT_DISC: u8 = 4;
    pub const LOCAL_PREF: u8 = 5;
    pub const ATOMIC_AGGREGATE: u8 = 6;
    pub const AGGREGATOR: u8 = 7;
    pub const COMMUNITIES: u8 = 8;
    pub const ORIGINATOR_ID: u8 = 9;
    pub const CLUSTER_LIST: u8 = 10;
    pub const MP_REACH_NLRI: u8 = 14;
    pub const MP_UNREACH_NLRI: u8 = 15;
    pub const EXTENDED_COMMUNITIES: u8 = 16;
    pub const AS4_PATH: u8 = 17;
    pub const AS4_AGGREGATOR: u8 = 18;
    pub const LARGE_COMMUNITIES: u8 = 32;

    /// Registry name for display; `None` for codes we do not know.
    pub fn name(code: u8) -> Option<&'static str> {
        Some(match code {
            ORIGIN => "ORIGIN",
            AS_PATH => "AS_PATH",
            NEXT_HOP => "NEXT_HOP",
            MULTI_EXIT_DISC => "MULTI_EXIT_DISC",
            LOCAL_PREF => "LOCAL_PREF",
            ATOMIC_AGGREGATE => "ATOMIC_AGGREGATE",
            AGGREGATOR => "AGGREGATOR",
            COMMUNITIES => "COMMUNITIES",
            ORIGINATOR_ID => "ORIGINATOR_ID",
            CLUSTER_LIST => "CLUSTER_LIST",
            MP_REACH_NLRI => "MP_REACH_NLRI",
            MP_UNREACH_NLRI => "MP_UNREACH_NLRI",
            EXTENDED_COMMUNITIES => "EXTENDED_COMMUNITIES",
            AS4_PATH => "AS4_PATH",
            AS4_AGGREGATOR => "AS4_AGGREGATOR",
            LARGE_COMMUNITIES => "LARGE_COMMUNITIES",
            _ => return None,
        })
    }
}

/// Path attribute flag bits (RFC 4271 §4.3).
pub mod attr_flags {
    pub const OPTIONAL: u8 = 0x80;
    pub const TRANSITIVE: u8 = 0x40;
    pub const PARTIAL: u8 = 0x20;
    pub const EXTENDED_LENGTH: u8 = 0x10;
}

/// Capability codes (RFC 5492 registry).
pub mod capability_code {
    pub const MULTIPROTOCOL: u8 = 1;
    pub const ROUTE_REFRESH: u8 = 2;
    pub const EXTENDED_NEXT_HOP: u8 = 5;
    pub const EXTENDED_MESSAGE: u8 = 6;
    pub const GRACEFUL_RESTART: u8 = 64;
    pub const FOUR_OCTET_AS: u8 = 65;
    pub const ADD_PATH: u8 = 69;
    pub const ENHANCED_ROUTE_REFRESH: u8 = 70;
    /// RFC 9494.
    pub const LONG_LIVED_GRACEFUL_RESTART: u8 = 71;
    pub const FQDN: u8 = 73;
}

/// OPEN optional parameter types (RFC 5492, RFC 9072).
pub mod open_param {
    pub const CAPABILITIES: u8 = 2;
    /// RFC 9072: marks the extended optional parameters length encoding.
    pub const EXTENDED_LENGTH: u8 = 255;
}

/// NOTIFICATION error codes and subcodes (RFC 4271 §4.5, RFC 4486, RFC 7313, RFC 9687).
pub mod notification {
    pub const MESSAGE_HEADER_ERROR: u8 = 1;
    pub const OPEN_MESSAGE_ERROR: u8 = 2;
    pub const UPDATE_MESSAGE_ERROR: u8 = 3;
    pub const HOLD_TIMER_EXPIRED: u8 = 4;
    pub const FSM_ERROR: u8 = 5;
    pub const CEASE: u8 = 6;
    pub const ROUTE_REFRESH_MESSAGE_ERROR: u8 = 7;
    pub const SEND_HOLD_TIMER_EXPIRED: u8 = 8;

    pub mod header {
        pub const CONNECTION_NOT_SYNCHRONIZED: u8 = 1;
        pub const BAD_MESSAGE_LENGTH: u8 = 2;
        pub const BAD_MESSAGE_TYPE: u8 = 3;
    }
    pub mod open {
        pub const UNSPECIFIC: u8 = 0;
        pub const UNSUPPORTED_VERSION_NUMBER: u8 = 1;
        pub const BAD_PEER_AS: u8 = 2;
        pub const BAD_BGP_IDENTIFIER: u8 = 3;
        pub const UNSUPPORTED_OPTIONAL_PARAMETER: u8 = 4;
        pub const UNACCEPTABLE_HOLD_TIME: u8 = 6;
        pub const UNSUPPORTED_CAPABILITY: u8 = 7;
    }
    pub mod update {
        pub const MALFORMED_ATTRIBUTE_LIST: u8 = 1;
        pub const UNRECOGNIZED_WELL_KNOWN_ATTRIBUTE: u8 = 2;
        pub const MISSING_WELL_KNOWN_ATTRIBUTE: u8 = 3;
        pub const ATTRIBUTE_FLAGS_ERROR: u8 = 4;
        pub const ATTRIBUTE_LENGTH_ERROR: u8 = 5;
        pub const INVALID_ORIGIN_ATTRIBUTE: u8 = 6;
        pub const INVALID_NEXT_HOP_ATTRIBUTE: u8 = 8;
        pub const OPTIONAL_ATTRIBUTE_ERROR: u8 = 9;
        pub const INVALID_NETWORK_FIELD: u8 = 10;
        pub const MALFORMED_AS_PATH: u8 = 11;
    }
    pub mod fsm {
        pub const UNSPECIFIED: u8 = 0;
        pub const UNEXPECTED_IN_OPENSENT: u8 = 1;
        pub const UNEXPECTED_IN_OPENCONFIRM: u8 = 2;
        pub const UNEXPECTED_IN_ESTABLISHED: u8 = 3;
    }
    pub mod cease {
        pub const MAXIMUM_PREFIXES_REACHED: u8 = 1;
        pub const ADMINISTRATIVE_SHUTDOWN: u8 = 2;
        pub const PEER_DECONFIGURED: u8 = 3;
        pub const ADMINISTRATIVE_RESET: u8 = 4;
        pub const CONNECTION_REJECTED: u8 = 5;
        pub const OTHER_CONFIGURATION_CHANGE: u8 = 6;
        pub const CONNECTION_COLLISION_RESOLUTION: u8 = 7;
        pub const OUT_OF_RESOURCES: u8 = 8;
        pub const HARD_RESET: u8 = 9;
        pub const BFD_DOWN: u8 = 10;
    }
    pub mod route_refresh {
        pub const INVALID_MESSAGE_LENGTH: u8 = 1;
    }
}

/// ORIGIN values (RFC 4271 §5.1.1).
pub mod origin {
    pub const IGP: u8 = 0;
    pub const EGP: u8 = 1;
    pub const INCOMPLETE: u8 = 2;
}

/// AS_PATH segment types (RFC 4271 §4.3, RFC 5065).
pub mod as_segment {
    pub const AS_SET: u8 = 1;
    pub const AS_SEQUENCE: u8 = 2;
    pub const AS_CONFED_SEQUENCE: u8 = 3;
    pub const AS_CONFED_SET: u8 = 4;
}
