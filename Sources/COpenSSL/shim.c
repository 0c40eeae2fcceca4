#include "COpenSSL.h"

#include <string.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/pem.h>

static void set_error(char *err, size_t errlen, const char *fallback) {
  if (!err || errlen == 0) return;
  unsigned long code = ERR_get_error();
  if (code) {
    ERR_error_string_n(code, err, errlen);
  } else {
    strncpy(err, fallback, errlen - 1);
    err[errlen - 1] = 0;
  }
  ERR_clear_error();
}

static int is_p256(EVP_PKEY *key) {
  char group[64] = {0};
  size_t glen = 0;
  if (EVP_PKEY_get_base_id(key) != EVP_PKEY_EC) return 0;
  if (!EVP_PKEY_get_group_name(key, group, sizeof(group), &glen)) return 0;
  return strcmp(group, "prime256v1") == 0 || strcmp(group, "P-256") == 0;
}

static EVP_PKEY *load(const char *pem, size_t len, int private_key, char *err, size_t errlen) {
  BIO *bio = BIO_new_mem_buf(pem, (int)len);
  if (!bio) {
    set_error(err, errlen, "cannot allocate a memory BIO");
    return NULL;
  }
  EVP_PKEY *key = private_key ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL)
                              : PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
  BIO_free(bio);
  if (!key) {
    set_error(err, errlen, "not a PEM key");
    return NULL;
  }
  if (!is_p256(key)) {
    EVP_PKEY_free(key);
    ERR_clear_error();
    if (err && errlen) {
      strncpy(err, "the key is not an EC P-256 key, which ES256 requires", errlen - 1);
      err[errlen - 1] = 0;
    }
    return NULL;
  }
  return key;
}

EVP_PKEY *pw_es256_load_private_pem(const char *pem, size_t len, char *err, size_t errlen) {
  return load(pem, len, 1, err, errlen);
}

EVP_PKEY *pw_es256_load_public_pem(const char *pem, size_t len, char *err, size_t errlen) {
  return load(pem, len, 0, err, errlen);
}

int pw_es256_sign(EVP_PKEY *key, const unsigned char *msg, size_t msglen, unsigned char *sig, char *err, size_t errlen) {
  int ok = 0;
  unsigned char der[80];
  size_t derlen = sizeof(der);
  ECDSA_SIG *parsed = NULL;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  if (!ctx) goto done;
  if (EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) != 1) goto done;
  if (EVP_DigestSign(ctx, der, &derlen, msg, msglen) != 1) goto done;
  const unsigned char *p = der;
  parsed = d2i_ECDSA_SIG(NULL, &p, (long)derlen);
  if (!parsed) goto done;
  const BIGNUM *r = NULL, *s = NULL;
  ECDSA_SIG_get0(parsed, &r, &s);
  if (BN_bn2binpad(r, sig, 32) != 32 || BN_bn2binpad(s, sig + 32, 32) != 32) goto done;
  ok = 1;
done:
  if (!ok) set_error(err, errlen, "signing failed");
  ECDSA_SIG_free(parsed);
  EVP_MD_CTX_free(ctx);
  return ok;
}

int pw_es256_verify(EVP_PKEY *key, const unsigned char *msg, size_t msglen, const unsigned char *sig) {
  int valid = 0;
  unsigned char *der = NULL;
  EVP_MD_CTX *ctx = NULL;
  ECDSA_SIG *parsed = ECDSA_SIG_new();
  BIGNUM *r = BN_bin2bn(sig, 32, NULL);
  BIGNUM *s = BN_bin2bn(sig + 32, 32, NULL);
  if (!parsed || !r || !s) goto done;
  if (ECDSA_SIG_set0(parsed, r, s) != 1) goto done;
  r = s = NULL;  // owned by parsed now
  int derlen = i2d_ECDSA_SIG(parsed, &der);
  if (derlen <= 0) goto done;
  ctx = EVP_MD_CTX_new();
  if (!ctx) goto done;
  if (EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, key) != 1) goto done;
  valid = EVP_DigestVerify(ctx, der, (size_t)derlen, msg, msglen) == 1;
done:
  ERR_clear_error();
  BN_free(r);
  BN_free(s);
  ECDSA_SIG_free(parsed);
  OPENSSL_free(der);
  EVP_MD_CTX_free(ctx);
  return valid;
}

size_t pw_es256_public_pem(EVP_PKEY *key, char *out, size_t outlen) {
  BIO *bio = BIO_new(BIO_s_mem());
  if (!bio) return 0;
  size_t needed = 0;
  if (PEM_write_bio_PUBKEY(bio, key) == 1) {
    char *data = NULL;
    long len = BIO_get_mem_data(bio, &data);
    if (len > 0) {
      needed = (size_t)len;
      if (out && outlen >= needed) memcpy(out, data, needed);
    }
  }
  BIO_free(bio);
  ERR_clear_error();
  return needed;
}

void pw_es256_free(EVP_PKEY *key) {
  EVP_PKEY_free(key);
}

int pw_openssl_init_without_atexit(void) {
  return OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
}
