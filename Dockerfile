# Multi-stage build: compile in the Rust image, run from a slim Debian as a non-root user.
#
#   docker build -t sluice . && docker run -p 127.0.0.1:6379:6379 sluice
#
# tests/it/dockerfile.rs rebuilds this stage's context (exactly the files COPYed below) in a
# scratch directory and runs these RUN steps there, so a file missing here fails the tests.
FROM rust:1-bookworm AS build
WORKDIR /src

# Dependencies in their own layer: the manifests with stub targets, so editing the sources
# does not rebuild every crate. Every member of the workspace must be present for cargo to
# read it, though only the server package (with its layer crates, crates/) is built.
COPY Cargo.toml Cargo.lock ./
COPY loadgen/Cargo.toml loadgen/
COPY crates/num/Cargo.toml crates/num/
COPY crates/limiter/Cargo.toml crates/limiter/
RUN mkdir -p src benches loadgen/src crates/num/src crates/limiter/src \
    && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
    && echo 'fn main() {}' > benches/hot_paths.rs \
    && echo 'fn main() {}' > loadgen/src/main.rs \
    && touch crates/num/src/lib.rs crates/limiter/src/lib.rs \
    && cargo build --release --locked -p sluice \
    && rm -rf src benches loadgen/src crates/num/src crates/limiter/src

COPY src ./src
COPY benches ./benches
COPY loadgen/src ./loadgen/src
COPY crates/num/src ./crates/num/src
COPY crates/limiter/src ./crates/limiter/src
# touch: COPY keeps the files' old times, which cargo would take for "already built" stubs.
RUN touch src/main.rs src/lib.rs crates/num/src/lib.rs crates/limiter/src/lib.rs \
    && cargo build --release --locked -p sluice --bin sluice \
    && strip target/release/sluice

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --no-create-home sluice
COPY --from=build /src/target/release/sluice /usr/local/bin/sluice
USER sluice
EXPOSE 6379
# PING over bash's /dev/tcp: the slim image has no redis-cli.
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/6379 && printf 'PING\\r\\n' >&3 && read -t 2 -r reply <&3 && [[ $reply == +PONG* ]]"]
# Inside the container listen on every interface; publish the port to choose who reaches it.
# As the official Redis image does, protected mode is off: publish the port only where
# intended, and set --requirepass for anything reachable by others.
ENTRYPOINT ["/usr/local/bin/sluice", "--bind", "0.0.0.0", "--port", "6379", "--protected-mode", "no"]
