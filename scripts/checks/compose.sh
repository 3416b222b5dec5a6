#!/usr/bin/env bash
# docker-compose.yml delivers: checked without a container engine.
#
#   scripts/checks/compose.sh [--bin-dir DIR] [--keep]
#
# 1. The file: valid against the Compose Specification's JSON schema (vendored in
#    deploy/compose-spec/), after interpolation with a .env made by `make .env` (mode 600, user push,
#    random RabbitMQ and Redis passwords, not overwritten by a second `make .env`, which adds a
#    REDIS_PASSWORD to an older .env without one and changes nothing else); without .env, or with one
#    without REDIS_PASSWORD, it does not interpolate, naming `make .env`. Redis runs with
#    --protected-mode yes, --requirepass ${REDIS_PASSWORD:?…}, --maxmemory and --maxmemory-policy
#    noeviction, its healthcheck's redis-cli with REDISCLI_AUTH; every PUSH_REDIS_URL is
#    redis://:${REDIS_PASSWORD}@redis…. The push image's containers, Redis and the policy import have
#    read_only: true, cap_drop: [ALL], security_opt: [no-new-privileges:true] (the push image's a
#    tmpfs /tmp); push-console mounts no signing keys (no keys volume, only its operators file).
#    Every container runs as a non-root user; `guest` appears nowhere; RabbitMQ's default user and
#    every PUSH_AMQP_URL come from RABBITMQ_USER and RABBITMQ_PASSWORD; apns-sandbox has --host
#    0.0.0.0 and --tls-name apns-sandbox and that is the name the services reach it by;
#    deploy/rabbitmq/policies.json is imported by a one-shot service every service that uses RabbitMQ
#    waits for; PUSH_ADMIN_PORT is set apart from PUSH_HTTP_PORT (but for push-console, which has one
#    port); every published port is on 127.0.0.1; the image prepares the volumes its non-root user
#    writes to. push-console: profile console, PUSH_HTTP_PORT 8090 published as 127.0.0.1:8090:8090,
#    no default operator or password in the file; PUSH_CONSOLE_OPERATORS_FILE is
#    config/console-operators.json bind-mounted read-only in the long form (a missing file fails the
#    start); that file is not in git and .gitignore and .dockerignore keep it out.
# 2. The stack: every compose service started as compose would start it, from the real binaries of
#    --bin-dir (default .build/debug): its command or entrypoint and its environment exactly as the
#    file gives them after interpolation with that .env, the image's ENV (deploy/Dockerfile) under
#    it. What a container engine would add is stood in for:
#    - Networks: a private network and mount namespace (`unshare --net --mount`; as root, or a user
#      namespace otherwise), so nothing of the host's network is touched or reachable and compose's
#      own port numbers are used (RabbitMQ 5672 and 15672, Redis 6379, apns-sandbox 2197/2198, the
#      services 8080/9090). Inside it a private /etc/hosts (bind-mounted over the namespace's view
#      of /etc/hosts) maps each compose service name to its own loopback address: rabbitmq and redis
#      to 127.0.0.1 (where scripts/rabbitmq.sh and scripts/redis.sh listen), every other service
#      to one of 127.0.0.2 and up. The binaries resolve names with getaddrinfo, which reads it.
#      (glibc's HOSTALIASES maps names to names, not addresses, and only for DNS; /etc/hosts itself
#      is the host's and shared.) In one namespace the services would all bind 0.0.0.0:8080, so
#      each gets PUSH_HTTP_HOST=its address: the one variable added to compose's environment.
#    - Images: container paths (/app, the WORKDIR with config/ and localization/ as the Dockerfile
#      copies them, and every volume's mount point) become directories of a private root, named
#      volumes directories of their own with the owner the image gives their mount point; bind
#      mounts are copies. The push image's programs are --bin-dir's; the rabbitmq image's
#      rabbitmqadmin is Debian's copy of the same script.
#    - Users: as root, services of the push image run as uid 10001 (its USER push), rabbitmqadmin
#      as uid 999 (the image's rabbitmq user), via setpriv; otherwise as the invoking user.
#    - Containers: each service runs in a mount namespace of its own (unshare --mount) where the
#      volumes and bind mounts of the other services are hidden, its `:ro` ones are read-only and,
#      with read_only: true, so are the image's paths; setpriv empties its bounding and inheritable
#      capability sets (cap_drop: [ALL]) and sets no_new_privs (no-new-privileges). /tmp is the
#      host's (compose's tmpfs).
#    - RabbitMQ and Redis are the project's own instances (scripts/rabbitmq.sh with the management
#      plugin, scripts/redis.sh), set up like the official images: the .env user as administrator,
#      no guest. The policy scripts/rabbitmq.sh sets is removed first, so the one-shot's import is
#      what puts it back. Redis gets the compose command's options with CONFIG SET (the password
#      last); a client without the password must be refused, the healthcheck's command answer PONG.
#    Then, in compose's dependency order: dev-keys and rabbitmq-policies run to exit 0 (the policy is
#    then on the broker, equal to the file); apns-sandbox (with --host 0.0.0.0) writes its CA, and
#    https://apns-sandbox:2197 verifies with it (https://ITS-ADDRESS:2197 does not: the certificate
#    names apns-sandbox, not that address); the four services become ready on PUSH_ADMIN_PORT
#    (push-ingest's PUSH_HTTP_PORT serves the API, not /healthz), as the expected uid, with CapBnd 0,
#    NoNewPrivs 1 and the image's paths mounted read-only. A device is
#    registered through http://push-ingest:8080, a push request published with pika to
#    PUSH_AMQP_URL, and apns-sandbox's admin API must show it delivered to that device.
#    push-console (run as `--profile console` would) gets an operators file made as docs/reports-and-console.md says
#    (`pushctl console hash-password` and `hash-key` of --bin-dir, a random password and key) in
#    place of config/console-operators.json, becomes ready on PUSH_HTTP_PORT 8090, redirects to
#    /login and answers 401 without a session or key; its operator logs in, and with the API key it
#    reports that request done and delivered, and push.send with its consumer; its keys directory is
#    empty in its mount namespace and its status still lists the app. Every service must exit 0 on
#    SIGTERM.
# Prints one line per check and `compose: N passed, N failed`; exits 1 when a check failed, 2 on a
# usage error, 3 when a prerequisite is missing. Everything started is stopped at the end, also on
# failure or Ctrl-C; the private directory (logs) is removed unless --keep. About 15 s.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
case " $* " in
    *" -h "* | *" --help "*)
        sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
        exit 0
        ;;
esac
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)
for module in yaml jsonschema pika; do
    if ! "$PY" -c "import $module" 2>/dev/null; then
        echo "compose.sh: python3-$module is not installed (run scripts/install-deps.sh)" >&2
        exit 3
    fi
done
exec "$PY" scripts/checks/compose.py "$@"
