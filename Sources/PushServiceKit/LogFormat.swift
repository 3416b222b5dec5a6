/// How log lines look on stdout (`PUSH_LOG_FORMAT`).
public enum LogFormat: String, Sendable, Hashable, CaseIterable {
    /// `2026-01-02T03:04:05.678Z info push-send: message key=value` (see ``LogRecord/textLine``).
    case text
    /// One JSON object per line: `{"ts":…,"level":…,"label":…,"message":…,<metadata>}` (see ``LogRecord/jsonLine``).
    case json
}
