extension PushConfiguration {
    /// The environment variables every service reads, for `--help`.
    public static let environmentHelp = """
        Configuration (environment variables; PUSH_CONFIG_FILE names an optional JSON file of the same keys, which the environment overrides):
          PUSH_AMQP_URL          RabbitMQ URL (default amqp://guest:guest@127.0.0.1:5672/%2f; amqps:// for TLS)
          PUSH_REDIS_URL         Redis URL (default redis://127.0.0.1:6379/0)
          PUSH_APPS_FILE         per-app APNs credentials, ingest keys and limits (default config/apps.json)
          PUSH_APNS_ENDPOINT     APNs override, e.g. https://127.0.0.1:2197 for apns-sandbox
          PUSH_APNS_CA_FILE      extra CA certificates (PEM) to trust, e.g. apns-sandbox's
          PUSH_LOCALIZATION_DIR  <locale>.strings catalogs (default localization)
          PUSH_HTTP_PORT         admin listener port (/healthz, /readyz, /metrics)
          PUSH_HTTP_HOST         admin listener address (default 0.0.0.0)
          PUSH_LOG_LEVEL         trace, debug, info (default), notice, warning, error, critical
          PUSH_LOG_FORMAT        text (default) or json
          PUSH_SHUTDOWN_TIMEOUT_S  seconds SIGTERM may take to drain in-flight work (default 30)
        """
}
