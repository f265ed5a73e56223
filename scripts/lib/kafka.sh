# shellcheck shell=bash
# Kafka's cluster ids and Java command lines, shared by scripts/stack.sh (one broker) and scripts/cluster.sh
# (three). The caller sets ROOT (the repository) and KAFKA_LIBS (the jars' folder) before
# calling; nothing here runs at source time.

# kafka_cluster_id: print a new Kafka cluster id: 16 random bytes, base64url without
# padding. One id in 64 starts with '-', which the CLI's argument parser takes for an
# option ("--cluster-id: expected one argument"); Kafka's own Uuid.randomUuid() draws
# again in that case, and so does this.
kafka_cluster_id() {
  local id=-
  while [ "${id#-}" != "$id" ]; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
  done
  printf '%s\n' "$id"
}

# kafka_java_tool CLASS [ARGS...]: run a Kafka CLI class from $KAFKA_LIBS in a small JVM,
# under timeout when KAFKA_TOOL_TIMEOUT is set (seconds, or any duration timeout takes).
kafka_java_tool() {
  ${KAFKA_TOOL_TIMEOUT:+timeout -k 5 "$KAFKA_TOOL_TIMEOUT"} \
    java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$ROOT/scripts/kafka/tools-log4j2.xml" \
    -cp "$KAFKA_LIBS/*" "$@"
}

# kafka_broker_cmd HEAP LOGDIR PROPS: set the array KAFKA_CMD to a broker's command line:
# java with the words of HEAP (e.g. "-Xms512m -Xmx512m"), its logs in LOGDIR, kafka.Kafka
# reading PROPS. The caller runs it detached, in its own way.
kafka_broker_cmd() {
  local heap
  read -ra heap <<<"$1"
  KAFKA_CMD=(java "${heap[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20
    -Djava.awt.headless=true
    -Dlog4j2.configurationFile="$ROOT/scripts/kafka/log4j2.xml"
    -Dkafka.logs.dir="$2"
    -cp "$KAFKA_LIBS/*" kafka.Kafka "$3")
}
