# Multi-stage build: compile in the Rust image, run from a slim Debian with a non-root user.
# (Not built on the development machines, which have no Docker engine.)
FROM rust:1-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY benches ./benches
RUN cargo build --release --locked --bin sluice

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --no-create-home sluice
COPY --from=build /src/target/release/sluice /usr/local/bin/sluice
USER sluice
EXPOSE 6379
# Inside the container listen on every interface; publish the port to choose who reaches it.
# As the official Redis image does, protected mode is off: publish the port only where
# intended, and set --requirepass for anything reachable by others.
ENTRYPOINT ["/usr/local/bin/sluice", "--bind", "0.0.0.0", "--port", "6379", "--protected-mode", "no"]
