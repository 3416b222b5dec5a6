#ifndef PUSH_COPENSSL_SHIM_H
#define PUSH_COPENSSL_SHIM_H

#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pkcs12.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/bio.h>
#include <openssl/rand.h>

// Function-like macros in OpenSSL 3 that Swift cannot import.
static inline long push_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}

static inline int push_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

static inline long push_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}

static inline void push_OPENSSL_free(void *pointer) {
    OPENSSL_free(pointer);
}

static inline int push_BIO_get_mem_data(BIO *bio, char **data) {
    return (int)BIO_get_mem_data(bio, data);
}

#endif
