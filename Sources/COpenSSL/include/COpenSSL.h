#ifndef PUSHWORKER_COPENSSL_H
#define PUSHWORKER_COPENSSL_H

#include <stddef.h>
#include <openssl/evp.h>

// ES256 (ECDSA P-256 with SHA-256) as JWTs use it: signatures are the raw 64-byte r||s, not DER.
// Keys are EVP_PKEY handles; free them with pw_es256_free. Functions that can fail write
// OpenSSL's reason into err (NUL-terminated, at most errlen bytes).

/// Loads a PKCS#8 or SEC1 PEM private key (Apple's .p8 files are PKCS#8); NULL on failure.
EVP_PKEY *pw_es256_load_private_pem(const char *pem, size_t len, char *err, size_t errlen);

/// Loads a PEM public key (SubjectPublicKeyInfo); NULL on failure.
EVP_PKEY *pw_es256_load_public_pem(const char *pem, size_t len, char *err, size_t errlen);

/// Signs msg; writes 64 bytes to sig. Returns 1 on success, 0 on failure.
int pw_es256_sign(EVP_PKEY *key, const unsigned char *msg, size_t msglen, unsigned char *sig, char *err, size_t errlen);

/// Returns 1 when sig (64 bytes r||s) is a valid signature of msg, 0 when it is not.
int pw_es256_verify(EVP_PKEY *key, const unsigned char *msg, size_t msglen, const unsigned char *sig);

/// Writes the PEM of the key's public half into out; returns the length needed (call with
/// outlen 0 to ask), or 0 on failure.
size_t pw_es256_public_pem(EVP_PKEY *key, char *out, size_t outlen);

void pw_es256_free(EVP_PKEY *key);

/// Initialises OpenSSL without its atexit cleanup; must be the process's first OpenSSL call to
/// take effect. Returns 1 on success.
int pw_openssl_init_without_atexit(void);

#endif
