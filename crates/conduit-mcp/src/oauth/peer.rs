//! Whose process is at the other end of a loopback connection, from the kernel's socket
//! table: the sign-in's redirect listener takes the browser's answer only from a process
//! of the same user.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};

/// Who is at the other end of a connection accepted on loopback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peer {
    /// A process of the user Conduit runs as.
    SameUser,
    /// A process of another user (its uid).
    OtherUser(u32),
    /// The socket table does not list the other end: it closed already (a reset before its
    /// owner could be looked up). Every connection to this loopback listener comes from
    /// this network namespace, whose sockets the tables list.
    NotListed,
    /// Not told: no socket table (not Linux).
    Unknown,
}

/// The owner of the process at `peer`, which connected to `local`.
pub(crate) async fn peer_of(peer: SocketAddr, local: SocketAddr) -> Peer {
    let (SocketAddr::V4(peer), SocketAddr::V4(local)) = (peer, local) else {
        return Peer::Unknown;
    };
    let (Ok(table), Some(own)) = (
        tokio::fs::read_to_string("/proc/net/tcp").await,
        own_uid().await,
    ) else {
        return Peer::Unknown;
    };
    // An IPv6 socket reaches the IPv4 listener through the v4-mapped address
    // (`::ffff:127.0.0.1`), and is listed in the IPv6 table (absent when IPv6 is off).
    let table6 = tokio::fs::read_to_string("/proc/net/tcp6")
        .await
        .unwrap_or_default();
    match socket_owner(&table, peer, local).or_else(|| socket_owner(&table6, peer, local)) {
        Some(uid) if uid == own => Peer::SameUser,
        Some(uid) => Peer::OtherUser(uid),
        None => Peer::NotListed,
    }
}

/// The user this process runs as: the owner of its `/proc` folder.
async fn own_uid() -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        tokio::fs::metadata("/proc/self")
            .await
            .ok()
            .map(|m| m.uid())
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The uid of the socket whose own address is `own` and whose other end is `remote`, in
/// the text of `/proc/net/tcp` (`sl local_address rem_address st ... uid ...`, addresses as
/// the kernel's hex: the IPv4 address in memory order, the port as a number).
fn socket_owner(table: &str, own: SocketAddrV4, remote: SocketAddrV4) -> Option<u32> {
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (local, other, uid) = (fields.get(1)?, fields.get(2)?, fields.get(7)?);
        (hex_address(local)? == own && hex_address(other)? == remote)
            .then(|| uid.parse().ok())
            .flatten()
    })
}

/// An address of either table: IPv4 (8 hex digits), or IPv6 (32: four 32-bit words in
/// memory order) when it is a v4-mapped one.
fn hex_address(text: &str) -> Option<SocketAddrV4> {
    let (address, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let ip = match address.len() {
        8 => Ipv4Addr::from(u32::from_str_radix(address, 16).ok()?.to_ne_bytes()),
        32 => {
            let mut bytes = [0u8; 16];
            for (word, chunk) in bytes.chunks_exact_mut(4).enumerate() {
                let digits = address.get(word * 8..word * 8 + 8)?;
                chunk.copy_from_slice(&u32::from_str_radix(digits, 16).ok()?.to_ne_bytes());
            }
            Ipv6Addr::from(bytes).to_ipv4_mapped()?
        }
        _ => return None,
    };
    Some(SocketAddrV4::new(ip, port))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    /// A v4-mapped address as the kernel writes it in the IPv6 table, on this machine.
    fn kernel_hex6(address: SocketAddrV4) -> String {
        let octets = address.ip().to_ipv6_mapped().octets();
        let words: String = octets
            .chunks_exact(4)
            .map(|word| {
                format!(
                    "{:08X}",
                    u32::from_ne_bytes([word[0], word[1], word[2], word[3]])
                )
            })
            .collect();
        format!("{words}:{:04X}", address.port())
    }

    /// An address as the kernel writes it in the table, on this machine.
    fn kernel_hex(address: SocketAddrV4) -> String {
        format!(
            "{:08X}:{:04X}",
            u32::from_ne_bytes(address.ip().octets()),
            address.port()
        )
    }

    #[test]
    fn the_other_ends_owner_is_read_from_the_socket_table() {
        let listener = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080);
        let client = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 50000);
        if cfg!(target_endian = "little") {
            assert_eq!(
                kernel_hex(listener),
                "0100007F:1F90",
                "as Linux writes it on x86"
            );
        }
        let row = |n: u32, own: SocketAddrV4, other: SocketAddrV4, uid: u32| {
            format!(
                "   {n}: {} {} 01 00000000:00000000 00:00000000 00000000  {uid}        0 {n}1111 1 0000000000000000 20 4 30 10 -1",
                kernel_hex(own),
                kernel_hex(other)
            )
        };
        let table = [
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode".to_owned(),
            row(0, listener, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0), 1000),
            row(1, client, listener, 1001),
            row(2, listener, client, 1000),
        ]
        .join("\n");
        assert_eq!(socket_owner(&table, client, listener), Some(1001));
        assert_eq!(socket_owner(&table, listener, client), Some(1000));
        let elsewhere = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 50001);
        assert_eq!(socket_owner(&table, elsewhere, listener), None);
        assert_eq!(
            socket_owner("garbage\nnot a table at all", client, listener),
            None
        );

        // Another user's IPv6 socket, connected through ::ffff:127.0.0.1.
        let mapped = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 50002);
        if cfg!(target_endian = "little") {
            assert_eq!(
                kernel_hex6(mapped),
                "0000000000000000FFFF00000100007F:C352",
                "as Linux writes it on x86"
            );
        }
        let table6 = format!(
            "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: {} {} 01 00000000:00000000 00:00000000 00000000  1002        0 44444 1 0000000000000000 20 4 30 10 -1",
            kernel_hex6(mapped),
            kernel_hex6(listener)
        );
        assert_eq!(socket_owner(&table6, mapped, listener), Some(1002));
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_connection_of_this_process_is_the_same_user() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let _client = tokio::net::TcpStream::connect(address).await.unwrap();
        let (_server_end, peer) = listener.accept().await.unwrap();
        assert_eq!(peer_of(peer, address).await, Peer::SameUser);

        // An IPv6 socket of this process through the v4-mapped address, where the machine
        // has IPv6.
        if let Ok(client6) =
            tokio::net::TcpStream::connect(("::ffff:127.0.0.1", address.port())).await
        {
            let (_server_end, peer) = listener.accept().await.unwrap();
            assert_eq!(peer_of(peer, address).await, Peer::SameUser);
            drop(client6);
        }
    }
}
