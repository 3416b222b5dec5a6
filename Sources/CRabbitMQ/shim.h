#ifndef PUSH_CRABBITMQ_SHIM_H
#define PUSH_CRABBITMQ_SHIM_H

#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>
#include <amqp_ssl_socket.h>

// amqp_login_with_properties is variadic (the SASL arguments follow the method), which Swift cannot
// call; these fix the argument list for the two SASL methods we use.
static inline amqp_rpc_reply_t push_amqp_login_plain(amqp_connection_state_t state, const char *vhost,
                                                     int channel_max, int frame_max, int heartbeat,
                                                     const amqp_table_t *properties, const char *user,
                                                     const char *password) {
    return amqp_login_with_properties(state, vhost, channel_max, frame_max, heartbeat, properties,
                                      AMQP_SASL_METHOD_PLAIN, user, password);
}

static inline amqp_rpc_reply_t push_amqp_login_external(amqp_connection_state_t state, const char *vhost,
                                                        int channel_max, int frame_max, int heartbeat,
                                                        const amqp_table_t *properties,
                                                        const char *identity) {
    return amqp_login_with_properties(state, vhost, channel_max, frame_max, heartbeat, properties,
                                      AMQP_SASL_METHOD_EXTERNAL, identity);
}

// Method ids and property flags are cast macros, which Swift does not import.
static const amqp_method_number_t push_amqp_connection_close_method = AMQP_CONNECTION_CLOSE_METHOD;
static const amqp_method_number_t push_amqp_connection_close_ok_method = AMQP_CONNECTION_CLOSE_OK_METHOD;
static const amqp_method_number_t push_amqp_connection_blocked_method = AMQP_CONNECTION_BLOCKED_METHOD;
static const amqp_method_number_t push_amqp_connection_unblocked_method = AMQP_CONNECTION_UNBLOCKED_METHOD;
static const amqp_method_number_t push_amqp_channel_close_method = AMQP_CHANNEL_CLOSE_METHOD;
static const amqp_method_number_t push_amqp_channel_close_ok_method = AMQP_CHANNEL_CLOSE_OK_METHOD;
static const amqp_method_number_t push_amqp_basic_ack_method = AMQP_BASIC_ACK_METHOD;
static const amqp_method_number_t push_amqp_basic_nack_method = AMQP_BASIC_NACK_METHOD;
static const amqp_method_number_t push_amqp_basic_return_method = AMQP_BASIC_RETURN_METHOD;
static const amqp_method_number_t push_amqp_basic_deliver_method = AMQP_BASIC_DELIVER_METHOD;
static const amqp_method_number_t push_amqp_basic_cancel_method = AMQP_BASIC_CANCEL_METHOD;

static const amqp_flags_t push_amqp_flag_content_type = AMQP_BASIC_CONTENT_TYPE_FLAG;
static const amqp_flags_t push_amqp_flag_content_encoding = AMQP_BASIC_CONTENT_ENCODING_FLAG;
static const amqp_flags_t push_amqp_flag_headers = AMQP_BASIC_HEADERS_FLAG;
static const amqp_flags_t push_amqp_flag_delivery_mode = AMQP_BASIC_DELIVERY_MODE_FLAG;
static const amqp_flags_t push_amqp_flag_priority = AMQP_BASIC_PRIORITY_FLAG;
static const amqp_flags_t push_amqp_flag_correlation_id = AMQP_BASIC_CORRELATION_ID_FLAG;
static const amqp_flags_t push_amqp_flag_reply_to = AMQP_BASIC_REPLY_TO_FLAG;
static const amqp_flags_t push_amqp_flag_expiration = AMQP_BASIC_EXPIRATION_FLAG;
static const amqp_flags_t push_amqp_flag_message_id = AMQP_BASIC_MESSAGE_ID_FLAG;
static const amqp_flags_t push_amqp_flag_timestamp = AMQP_BASIC_TIMESTAMP_FLAG;
static const amqp_flags_t push_amqp_flag_type = AMQP_BASIC_TYPE_FLAG;
static const amqp_flags_t push_amqp_flag_app_id = AMQP_BASIC_APP_ID_FLAG;

#endif
