//! Which local account a loopback connection comes from, read from the kernel's socket table
//! (`/proc/net/tcp` and `/proc/net/tcp6` on Linux), so the solo profile can serve its owner
//! without credentials and refuse every other account on the machine.
//!
//! Both ends of a loopback connection are sockets of this machine, so the table holds the
//! client's socket too: its local address is the connection's peer address, its remote
//! address the daemon's, and its `uid` column the account that opened it. The decision is
//! pure ([`account_in_table`]) so it is tested on the kernel's own text. On Linux the kernel
//! is asked first for the one socket (`sock_diag` over netlink, [`uid_by_netlink`]): the
//! tables grow with every socket of the machine, and reading them cost a hook's round trip
//! 12.6 ms.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use cairn_api::PeerAccount;

/// The socket tables, IPv4 then IPv6.
const SOCKET_TABLES: [&str; 2] = ["/proc/net/tcp", "/proc/net/tcp6"];
/// The `st` column of a socket in TIME_WAIT: its process is gone and the kernel shows it
/// with uid 0, so it never answers for an account.
const TIME_WAIT: &str = "06";

/// Looks up the account of the connection from `peer` to `local`, and compares it with
/// `owner` (the daemon's effective uid). Blocking: it reads files.
///
/// The kernel writes a socket table a page at a time, and a socket that moves in its hash
/// table between two pages (others opening and closing: a busy daemon) can be missed by a
/// read. A socket not found is looked for again, a few times, before the answer is
/// `Unknown`; the API answers that with "retry" (503), never with a refusal of the owner
/// nor with the owner's rights.
pub(crate) fn account_of(peer: SocketAddr, local: SocketAddr, owner: u32) -> PeerAccount {
    // First the kernel's answer for this one socket, in microseconds whatever the number of
    // sockets on the machine; the tables are read when it cannot be asked (a kernel without
    // sock_diag) or does not know the socket by this four-tuple (a dual-stack listener's
    // mapped addresses).
    match uid_by_netlink(peer, local) {
        Ok(Some(uid)) => return decide(Some(uid), owner),
        Ok(None) => {}
        Err(error) => tracing::debug!(%error, "sock_diag lookup failed; reading the socket table"),
    }
    for attempt in 0..LOOKUPS {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_millis(5 * attempt as u64));
        }
        if let Some(uid) = SOCKET_TABLES.iter().find_map(|path| {
            let table = match std::fs::read_to_string(path) {
                Ok(text) => text,
                // A kernel without IPv6 has no tcp6 table.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
                Err(error) => {
                    tracing::warn!(%error, path, "cannot read the socket table");
                    return None;
                }
            };
            uid_in_table(&table, peer, local)
        }) {
            return decide(Some(uid), owner);
        }
    }
    tracing::warn!(%peer, "the connection's socket was not found in the socket table");
    PeerAccount::Unknown
}

/// The uid of the live socket whose local address is `peer` and remote address `local`,
/// asked of the kernel over netlink (`sock_diag`, one socket by its four-tuple): `None` when
/// the kernel has no such socket, or it is in TIME_WAIT (whose uid is always 0).
#[cfg(target_os = "linux")]
fn uid_by_netlink(peer: SocketAddr, local: SocketAddr) -> std::io::Result<Option<u32>> {
    use netlink_packet_core::{NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload};
    use netlink_packet_sock_diag::SockDiagMessage;
    use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6, IPPROTO_TCP};
    use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, SocketId, StateFlags};
    use netlink_sys::{Socket, SocketAddr as KernelAddr, protocols::NETLINK_SOCK_DIAG};

    let (peer, local) = (canonical(peer), canonical(local));
    let family = if peer.is_ipv4() { AF_INET } else { AF_INET6 };
    let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
    socket.bind_auto()?;
    socket.connect(&KernelAddr::new(0, 0))?;
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST;
    let request = InetRequest {
        family,
        protocol: IPPROTO_TCP,
        extensions: ExtensionFlags::empty(),
        states: StateFlags::all(),
        socket_id: SocketId {
            source_port: peer.port(),
            destination_port: local.port(),
            source_address: peer.ip(),
            destination_address: local.ip(),
            interface_id: 0,
            // "No cookie": find the socket by its addresses.
            cookie: [0xff; 8],
        },
    };
    let mut packet = NetlinkMessage::new(header, SockDiagMessage::InetRequest(request).into());
    packet.finalize();
    let mut buffer = vec![0; packet.buffer_len()];
    packet.serialize(&mut buffer);
    socket.send(&buffer, 0)?;
    let mut received = vec![0u8; 8192];
    let size = socket.recv(&mut &mut received[..], 0)?;
    let message = NetlinkMessage::<SockDiagMessage>::deserialize(&received[..size])
        .map_err(|error| std::io::Error::other(error.to_string()))?;
    Ok(match message.payload {
        NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(response))
            if response.header.state != TCP_TIME_WAIT =>
        {
            Some(response.header.uid)
        }
        _ => None,
    })
}

#[cfg(not(target_os = "linux"))]
fn uid_by_netlink(_peer: SocketAddr, _local: SocketAddr) -> std::io::Result<Option<u32>> {
    Ok(None)
}

/// TCP's TIME_WAIT state, as sock_diag numbers states.
const TCP_TIME_WAIT: u8 = 6;

/// How many times a connection's socket is looked for.
const LOOKUPS: usize = 4;

/// The account of the connection from `peer` to `local` in the text of a socket table,
/// compared with `owner`.
#[cfg(test)]
pub(crate) fn account_in_table(
    table: &str,
    peer: SocketAddr,
    local: SocketAddr,
    owner: u32,
) -> PeerAccount {
    decide(uid_in_table(table, peer, local), owner)
}

fn decide(uid: Option<u32>, owner: u32) -> PeerAccount {
    match uid {
        Some(uid) if uid == owner => PeerAccount::Owner,
        Some(uid) => PeerAccount::Other(uid),
        None => PeerAccount::Unknown,
    }
}

/// The uid of the live socket whose local address is `peer` and remote address `local`.
fn uid_in_table(table: &str, peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    let (peer, local) = (canonical(peer), canonical(local));
    table.lines().skip(1).filter_map(parse_line).find_map(|entry| {
        (entry.state != TIME_WAIT && entry.local == peer && entry.remote == local)
            .then_some(entry.uid)
    })
}

/// One line of a socket table.
#[derive(Debug, PartialEq, Eq)]
struct Entry<'a> {
    local: SocketAddr,
    remote: SocketAddr,
    state: &'a str,
    uid: u32,
}

/// `sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid …`
fn parse_line(line: &str) -> Option<Entry<'_>> {
    let mut columns = line.split_whitespace();
    let _slot = columns.next()?;
    let local = parse_address(columns.next()?)?;
    let remote = parse_address(columns.next()?)?;
    let state = columns.next()?;
    let uid = columns.nth(3)?.parse().ok()?;
    Some(Entry { local, remote, state, uid })
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6). The kernel prints each 32-bit
/// word of the address as a number in the machine's byte order, the port in hex.
fn parse_address(text: &str) -> Option<SocketAddr> {
    let (address, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::to_ne_bytes);
    let ip = match address.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(address)?)),
        32 => {
            let mut octets = [0u8; 16];
            for (index, chunk) in octets.chunks_mut(4).enumerate() {
                chunk.copy_from_slice(&word(address.get(index * 8..index * 8 + 8)?)?);
            }
            IpAddr::V6(Ipv6Addr::from(octets))
        }
        _ => return None,
    };
    Some(canonical(SocketAddr::new(ip, port)))
}

/// IPv4-mapped IPv6 addresses as IPv4, so a dual-stack listener's peers match.
fn canonical(address: SocketAddr) -> SocketAddr {
    SocketAddr::new(address.ip().to_canonical(), address.port())
}

/// The daemon's effective uid, from `/proc/self/status` (`Uid:` real, effective, …).
pub(crate) fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|line| line.strip_prefix("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc/net/tcp` as the kernel wrote it with a listener on 127.0.0.1:55769 and one
    /// connection to it from port 48934; the client's socket is then given uid 1000, as
    /// another account's would be.
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode                                                     
   0: 0100007F:D9D9 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 161905 1 000000007a2112a8 100 0 0 10 0                    
   1: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1161 1 0000000055ffb2c1 100 0 0 10 0                      
   2: 0100007F:D9D9 0100007F:BF26 01 00000000:00000000 00:00000000 00000000     0        0 161907 1 00000000e44a7cbc 20 0 0 10 -1                    
   3: 0100007F:BF26 0100007F:D9D9 01 00000000:00000000 00:00000000 00000000  1000        0 161906 2 000000004e832763 20 0 0 10 -1                    
   4: 0100007F:BF27 0100007F:D9D9 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
";

    /// `/proc/net/tcp6` as the kernel wrote it with a listener on [::1]:38595 and one
    /// connection to it from port 49586, by uid 0.
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:96C3 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 161910 1 000000003707122c 100 0 0 10 0
   1: 00000000000000000000000001000000:96C3 00000000000000000000000001000000:C1B2 01 00000000:00000000 00:00000000 00000000     0        0 161912 1 000000007e7b0ea3 20 0 0 10 -1
   2: 00000000000000000000000001000000:C1B2 00000000000000000000000001000000:96C3 01 00000000:00000000 00:00000000 00000000     0        0 161911 2 00000000e04d1013 20 0 0 10 -1
   3: 0000000000000000FFFF00000100007F:C1B3 0000000000000000FFFF00000100007F:1F90 01 00000000:00000000 00:00000000 00000000   501        0 161913 2 00000000e04d1014 20 0 0 10 -1
";

    fn address(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn the_client_socket_of_a_connection_names_its_account() {
        let (peer, daemon) = (address("127.0.0.1:48934"), address("127.0.0.1:55769"));
        assert_eq!(account_in_table(TCP, peer, daemon, 1000), PeerAccount::Owner);
        assert_eq!(account_in_table(TCP, peer, daemon, 0), PeerAccount::Other(1000));

        let (peer, daemon) = (address("[::1]:49586"), address("[::1]:38595"));
        assert_eq!(account_in_table(TCP6, peer, daemon, 0), PeerAccount::Owner);
        assert_eq!(account_in_table(TCP6, peer, daemon, 1000), PeerAccount::Other(0));
        // A dual-stack listener sees IPv4 peers as IPv4-mapped addresses, or as IPv4.
        let (peer, daemon) = (address("127.0.0.1:49587"), address("127.0.0.1:8080"));
        assert_eq!(account_in_table(TCP6, peer, daemon, 501), PeerAccount::Owner);
        let mapped = address("[::ffff:127.0.0.1]:49587");
        assert_eq!(account_in_table(TCP6, mapped, daemon, 0), PeerAccount::Other(501));
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn closed_and_unknown_connections_answer_for_nobody() {
        // Port 48935 (BF27) is in TIME_WAIT: shown with uid 0 whoever opened it.
        let (peer, daemon) = (address("127.0.0.1:48935"), address("127.0.0.1:55769"));
        assert_eq!(account_in_table(TCP, peer, daemon, 0), PeerAccount::Unknown);
        let stranger = address("127.0.0.1:1");
        assert_eq!(account_in_table(TCP, stranger, daemon, 0), PeerAccount::Unknown);
        for garbage in ["", "sl local\n", "header\n 0: zz:zz 00:00 01 0 0 0 x\n"] {
            assert_eq!(account_in_table(garbage, stranger, daemon, 0), PeerAccount::Unknown);
        }
    }

    #[test]
    fn a_real_loopback_connection_is_the_owners() {
        let owner = effective_uid().expect("the daemon's uid is readable");
        for listen in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(listener) = std::net::TcpListener::bind(listen) else {
                continue; // No IPv6 on this machine.
            };
            let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (accepted, peer) = listener.accept().unwrap();
            assert_eq!(peer, client.local_addr().unwrap());
            let local = accepted.local_addr().unwrap();
            assert_eq!(account_of(peer, local, owner), PeerAccount::Owner, "{listen}");
            assert_eq!(
                account_of(peer, local, owner.wrapping_add(1)),
                PeerAccount::Other(owner),
                "{listen}: another daemon owner would refuse this connection"
            );
            // The kernel answers for the one socket, and knows no socket that is not there.
            #[cfg(target_os = "linux")]
            {
                assert_eq!(uid_by_netlink(peer, local).unwrap(), Some(owner), "{listen}");
                let gone = SocketAddr::new(peer.ip(), 1);
                assert_eq!(uid_by_netlink(gone, local).unwrap(), None, "{listen}");
            }
        }
    }
}
