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
#include <openssl/provider.h>

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

// apns-sandbox's server side: ALPN "h2" only, requested (not required) client certificates,
// in-memory EC keys and certificate extensions.

/// ALPN selection that accepts "h2" and nothing else: a client offering only other protocols gets a
/// fatal no_application_protocol alert.
static inline int push_alpn_select_h2_only(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                                           const unsigned char *in, unsigned int inlen, void *arg) {
    (void)ssl;
    (void)arg;
    unsigned int index = 0;
    while (index < inlen) {
        unsigned int length = in[index];
        if (index + 1 + length > inlen) break;
        if (length == 2 && in[index + 1] == 'h' && in[index + 2] == '2') {
            *out = in + index + 1;
            *outlen = 2;
            return SSL_TLSEXT_ERR_OK;
        }
        index += 1 + length;
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

static inline void push_SSL_CTX_select_alpn_h2_only(SSL_CTX *ctx) {
    SSL_CTX_set_alpn_select_cb(ctx, push_alpn_select_h2_only, NULL);
}

/// Verification callback that lets the handshake finish whatever the client certificate's
/// verification said; the server reads the outcome with SSL_get_verify_result afterwards.
static inline int push_verify_keep_going(int preverify_ok, X509_STORE_CTX *store) {
    (void)preverify_ok;
    (void)store;
    return 1;
}

/// Asks clients for a certificate without requiring one.
static inline void push_SSL_CTX_request_client_certificate(SSL_CTX *ctx) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, push_verify_keep_going);
}

/// Server options: no TLS compression, no renegotiation, the server's cipher order.
static inline void push_SSL_CTX_set_server_options(SSL_CTX *ctx) {
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
}

static inline EVP_PKEY *push_EVP_EC_gen_P256(void) {
    return EVP_EC_gen("P-256");
}

static inline void push_X509V3_set_ctx_nodb(X509V3_CTX *ctx) {
    X509V3_set_ctx_nodb(ctx);
}

static inline int push_X509_NAME_add_text_entry(X509_NAME *name, const char *field, const char *value) {
    return X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, (const unsigned char *)value, -1, -1, 0);
}

static inline long push_BIO_set_mem_eof_return(BIO *bio, int value) {
    return BIO_set_mem_eof_return(bio, value);
}

// The APNs client: certificate chains from .p12 files.
static inline long push_SSL_CTX_add1_chain_cert(SSL_CTX *ctx, X509 *certificate) {
    return SSL_CTX_add1_chain_cert(ctx, certificate);
}

/// XN_FLAG_RFC2253 combines several macros Swift cannot import.
static inline unsigned long push_XN_FLAG_RFC2253(void) {
    return XN_FLAG_RFC2253;
}

#endif
