# Multi-stage build of a static podcidr-bgp image.
# (Cannot be built in this project's CI: no container engine runs there.)
FROM rust:1.95-bookworm AS build
RUN rustup target add x86_64-unknown-linux-musl \
 && apt-get update && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked --target x86_64-unknown-linux-musl -p podcidr-bgp \
 && strip target/x86_64-unknown-linux-musl/release/podcidr-bgp

FROM gcr.io/distroless/static-debian12
COPY --from=build /src/target/x86_64-unknown-linux-musl/release/podcidr-bgp /podcidr-bgp
# uid 0 as the speaker DaemonSet runs it (every capability dropped but NET_BIND_SERVICE,
# see deploy/speaker/daemonset.yaml); the allocator Deployment sets uid 65532 itself.
USER 0:0
ENTRYPOINT ["/podcidr-bgp"]
CMD ["speaker", "--config-source", "kubernetes"]
