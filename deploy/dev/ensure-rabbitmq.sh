#!/usr/bin/env bash
# Makes sure a RabbitMQ broker answers on 127.0.0.1:5672 (guest/guest); starts the
# machine's rabbitmq-server if it does not. covmerge declares its own queues.
set -euo pipefail
answers() { rabbitmqctl -q status >/dev/null 2>&1 && (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; }
if answers; then echo "rabbitmq: running"; exit 0; fi
command -v rabbitmq-server >/dev/null || { echo "rabbitmq: not installed (apt-get install rabbitmq-server)" >&2; exit 1; }
echo "rabbitmq: starting"
rabbitmq-server -detached || true
for _ in $(seq 1 90); do
  if answers; then echo "rabbitmq: up"; exit 0; fi
  sleep 1
done
echo "rabbitmq: did not come up within 90 s" >&2
exit 1
