//! SCRAM's key derivations (RFC 5802 §3) over RustCrypto's `pbkdf2`, `hmac` and `sha2`:
//!
//! ```text
//! SaltedPassword  := Hi(password, salt, i)            PBKDF2-HMAC-H, hash_len bytes
//! ClientKey       := HMAC(SaltedPassword, "Client Key")
//! StoredKey       := H(ClientKey)
//! ServerKey       := HMAC(SaltedPassword, "Server Key")
//! ClientSignature := HMAC(StoredKey, AuthMessage)
//! ClientProof     := ClientKey XOR ClientSignature
//! ServerSignature := HMAC(ServerKey, AuthMessage)
//! ```
//!
//! The password is taken as its UTF-8 bytes without SASLprep, as Kafka's
//! `ScramFormatter.normalize` does, so credentials made by Kafka's tools and by the
//! clients here verify the same.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

use super::mechanism::ScramMechanism;

/// `HMAC-H(key, data)` of `mechanism`'s hash; `hash_len` bytes.
pub fn hmac(mechanism: ScramMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes keys of any length: `new_from_slice` cannot fail for it.
        let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key)
            .unwrap_or_else(|_| unreachable_key_length());
        mac.update(data);
        mac.finalize().into_bytes().to_vec()
    }
    match mechanism {
        ScramMechanism::Sha256 => run::<Hmac<Sha256>>(key, data),
        ScramMechanism::Sha512 => run::<Hmac<Sha512>>(key, data),
    }
}

#[cold]
fn unreachable_key_length() -> ! {
    // HMAC accepts every key length (RFC 2104): RustCrypto's `Hmac` never refuses one.
    panic!("HMAC refused a key length")
}

/// `H(data)`; `hash_len` bytes.
pub fn hash(mechanism: ScramMechanism, data: &[u8]) -> Vec<u8> {
    match mechanism {
        ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
        ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
    }
}

/// `Hi(password, salt, iterations)`: PBKDF2 with HMAC-H, `hash_len` bytes (RFC 5802
/// §2.2). Costs `iterations` HMACs: up to about 20 ms at 16384 iterations of SHA-512
/// on one core, so callers on an async runtime run it on a blocking thread.
pub fn salted_password(
    mechanism: ScramMechanism,
    password: &[u8],
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    let mut out = vec![0u8; mechanism.hash_len()];
    match mechanism {
        ScramMechanism::Sha256 => {
            pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out)
        }
        ScramMechanism::Sha512 => {
            pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out)
        }
    }
    out
}

/// `ClientKey := HMAC(SaltedPassword, "Client Key")`.
pub fn client_key(mechanism: ScramMechanism, salted_password: &[u8]) -> Vec<u8> {
    hmac(mechanism, salted_password, b"Client Key")
}

/// `StoredKey := H(ClientKey)`.
pub fn stored_key(mechanism: ScramMechanism, client_key: &[u8]) -> Vec<u8> {
    hash(mechanism, client_key)
}

/// `ServerKey := HMAC(SaltedPassword, "Server Key")`.
pub fn server_key(mechanism: ScramMechanism, salted_password: &[u8]) -> Vec<u8> {
    hmac(mechanism, salted_password, b"Server Key")
}

/// `(StoredKey, ServerKey)` of a salted password: what the broker keeps instead of the
/// password or the salted password (Kafka's `ScramControlManager.finishUpsertion`).
pub fn stored_and_server_key(
    mechanism: ScramMechanism,
    salted_password: &[u8],
) -> (Vec<u8>, Vec<u8>) {
    let client = client_key(mechanism, salted_password);
    (
        stored_key(mechanism, &client),
        server_key(mechanism, salted_password),
    )
}

/// Whether `proof` is the client proof of the holder of `stored_key` for
/// `auth_message` (RFC 5802 §3: the server recovers `ClientKey := ClientProof XOR
/// ClientSignature` and checks `H(ClientKey) == StoredKey`). The comparison is in
/// constant time; a proof of the wrong length is refused after the same work.
pub fn verify_proof(
    mechanism: ScramMechanism,
    stored_key: &[u8],
    auth_message: &[u8],
    proof: &[u8],
) -> subtle::Choice {
    let signature = hmac(mechanism, stored_key, auth_message);
    let mut client_key = vec![0u8; signature.len()];
    for (i, out) in client_key.iter_mut().enumerate() {
        *out = signature[i] ^ proof.get(i).copied().unwrap_or(0);
    }
    let length_ok = (proof.len() as u64).ct_eq(&(signature.len() as u64));
    hash(mechanism, &client_key).ct_eq(stored_key) & length_ok
}

/// The client's proof for `auth_message` from its salted password (the client side of
/// RFC 5802 §3; used by `drover admin users` tests and the unit tests).
pub fn client_proof(
    mechanism: ScramMechanism,
    salted_password: &[u8],
    auth_message: &[u8],
) -> Vec<u8> {
    let client = client_key(mechanism, salted_password);
    let stored = stored_key(mechanism, &client);
    let signature = hmac(mechanism, &stored, auth_message);
    client.iter().zip(signature).map(|(k, s)| k ^ s).collect()
}

/// `ServerSignature := HMAC(ServerKey, AuthMessage)`.
pub fn server_signature(
    mechanism: ScramMechanism,
    server_key: &[u8],
    auth_message: &[u8],
) -> Vec<u8> {
    hmac(mechanism, server_key, auth_message)
}

#[cfg(test)]
mod tests {
    use base64::{engine::general_purpose::STANDARD, Engine};

    use super::*;

    /// RFC 7677 §3's SCRAM-SHA-256 example: user "user", password "pencil".
    #[test]
    fn rfc7677_keys_and_proof() {
        let m = ScramMechanism::Sha256;
        let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let salted = salted_password(m, b"pencil", &salt, 4096);
        let auth_message = "n=user,r=rOprNGfwEbeRWgbNEkqO,\
             r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,\
             c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let proof = client_proof(m, &salted, auth_message.as_bytes());
        assert_eq!(
            STANDARD.encode(&proof),
            "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        let (stored, server) = stored_and_server_key(m, &salted);
        assert!(bool::from(verify_proof(
            m,
            &stored,
            auth_message.as_bytes(),
            &proof
        )));
        assert_eq!(
            STANDARD.encode(server_signature(m, &server, auth_message.as_bytes())),
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        let mut wrong = proof.clone();
        wrong[0] ^= 1;
        assert!(!bool::from(verify_proof(
            m,
            &stored,
            auth_message.as_bytes(),
            &wrong
        )));
        assert!(!bool::from(verify_proof(
            m,
            &stored,
            auth_message.as_bytes(),
            &proof[..31]
        )));
        assert!(!bool::from(verify_proof(
            m,
            &stored,
            auth_message.as_bytes(),
            &[]
        )));
    }

    /// RFC 5802 §5's SCRAM-SHA-1 exchange has no SHA-2 twin; the SHA-512 keys are
    /// checked for shape and for agreeing with each other.
    #[test]
    fn sha512_keys_have_its_length_and_verify() {
        let m = ScramMechanism::Sha512;
        let salted = salted_password(m, b"secret", b"salt", 4096);
        assert_eq!(salted.len(), 64);
        let (stored, server) = stored_and_server_key(m, &salted);
        assert_eq!((stored.len(), server.len()), (64, 64));
        let proof = client_proof(m, &salted, b"auth");
        assert!(bool::from(verify_proof(m, &stored, b"auth", &proof)));
        assert!(!bool::from(verify_proof(m, &stored, b"other", &proof)));
    }
}
