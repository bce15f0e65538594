//! The shared TLS context verifies certificates; redirects stay within their origin.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// A loopback HTTP/1.1 server answering each request with `answer(path)` (a status line
/// and headers, no body), counting the requests it read.
fn serve(answer: impl Fn(&str) -> String + Send + 'static) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request_line = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            // The rest of the head.
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            counted.fetch_add(1, Ordering::SeqCst);
            let path = request_line.split(' ').nth(1).unwrap_or("/").to_owned();
            let head = answer(&path);
            let _ = stream.write_all(
                format!("{head}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes(),
            );
        }
    });
    (url, seen)
}

#[derive(Debug)]
struct Refusal(Refused);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "refused: {:?}", self.0)
    }
}

impl std::error::Error for Refusal {}

fn client() -> reqwest::Client {
    client_builder()
        .redirect(same_origin_redirects(Refusal))
        .build()
        .unwrap()
}

/// The refusal a failed request carries, if any.
fn refusal(error: &reqwest::Error) -> Option<Refused> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = source {
        if let Some(Refusal(refused)) = error.downcast_ref::<Refusal>() {
            return Some(refused.clone());
        }
        source = error.source();
    }
    None
}

#[tokio::test]
async fn redirects_are_followed_only_within_their_origin() {
    let (elsewhere, stolen) = serve(|_| "HTTP/1.1 200 OK".into());
    let target = format!("{elsewhere}/stolen?token=t");
    let (origin, _) = serve(move |path| match path {
        "/start" => "HTTP/1.1 307 Temporary Redirect\r\nLocation: /next".into(),
        "/next" => "HTTP/1.1 200 OK".into(),
        "/away" => format!("HTTP/1.1 307 Temporary Redirect\r\nLocation: {target}"),
        looped => format!("HTTP/1.1 302 Found\r\nLocation: {looped}x"),
    });
    let client = client();

    let followed = client.get(format!("{origin}/start")).send().await.unwrap();
    assert_eq!(followed.status(), 200);
    assert_eq!(followed.url().path(), "/next");

    let away = client
        .post(format!("{origin}/away"))
        .body("the call's arguments")
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&away),
        Some(Refused::Elsewhere(
            format!("{elsewhere}/stolen?token=t").parse().unwrap()
        ))
    );
    assert_eq!(
        stolen.load(Ordering::SeqCst),
        0,
        "the redirect was followed"
    );

    let looped = client
        .get(format!("{origin}/loop"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(refusal(&looped), Some(Refused::TooMany));
}

/// A certificate for `localhost` and 127.0.0.1 that no authority signed.
fn self_signed() -> native_tls::Identity {
    use openssl::asn1::Asn1Time;
    use openssl::bn::BigNum;
    use openssl::hash::MessageDigest;
    use openssl::pkey::PKey;
    use openssl::rsa::Rsa;
    use openssl::x509::extension::SubjectAlternativeName;
    use openssl::x509::{X509, X509NameBuilder};

    let key = PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap();
    let mut name = X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", "localhost").unwrap();
    let name = name.build();
    let mut cert = X509::builder().unwrap();
    cert.set_version(2).unwrap();
    let serial = BigNum::from_u32(1).unwrap().to_asn1_integer().unwrap();
    cert.set_serial_number(&serial).unwrap();
    cert.set_subject_name(&name).unwrap();
    cert.set_issuer_name(&name).unwrap();
    cert.set_pubkey(&key).unwrap();
    cert.set_not_before(&Asn1Time::days_from_now(0).unwrap())
        .unwrap();
    cert.set_not_after(&Asn1Time::days_from_now(1).unwrap())
        .unwrap();
    let names = SubjectAlternativeName::new()
        .dns("localhost")
        .ip("127.0.0.1")
        .build(&cert.x509v3_context(None, None))
        .unwrap();
    cert.append_extension(names).unwrap();
    cert.sign(&key, MessageDigest::sha256()).unwrap();
    let cert = cert.build();
    native_tls::Identity::from_pkcs8(
        &cert.to_pem().unwrap(),
        &key.private_key_to_pem_pkcs8().unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn the_shared_tls_context_verifies_certificates() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = native_tls::TlsAcceptor::new(self_signed()).unwrap();
    let handshakes = Arc::new(AtomicUsize::new(0));
    let done = handshakes.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            if acceptor.accept(stream).is_ok() {
                done.fetch_add(1, Ordering::SeqCst);
            }
        }
    });

    // Two clients on the one context: both refuse the unsigned certificate.
    assert!(shared_tls().is_some(), "no shared TLS context was made");
    for _ in 0..2 {
        let error = client_builder()
            .build()
            .unwrap()
            .get(format!("https://localhost:{port}/"))
            .send()
            .await
            .unwrap_err();
        let mut chain = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            chain.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        assert!(chain.contains("certificate verify failed"), "{chain}");
    }
    assert_eq!(handshakes.load(Ordering::SeqCst), 0);
}
