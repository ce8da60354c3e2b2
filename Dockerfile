# Multi-stage build of a static podcidr-bgp image.
# (Cannot be built in this project's CI: no container engine runs there.)
FROM rust:1.95-bookworm AS build
RUN rustup target add x86_64-unknown-linux-musl \
 && apt-get update && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The shipped profile (profile.dist: fat LTO, one codegen unit), and no `demo` feature: the
# shipped binary carries no in-process fake API server.
RUN cargo build --profile dist --locked --no-default-features --target x86_64-unknown-linux-musl -p podcidr-bgp \
 && strip target/x86_64-unknown-linux-musl/dist/podcidr-bgp

FROM gcr.io/distroless/static-debian12
COPY --from=build /src/target/x86_64-unknown-linux-musl/dist/podcidr-bgp /podcidr-bgp
# Not root by default: the allocator and the CLI need nothing more. The speaker DaemonSet
# sets uid 0 itself, with every capability dropped but NET_BIND_SERVICE (non-root gets no
# added capability under no_new_privs), see deploy/speaker/daemonset.yaml.
USER 65532:65532
ENTRYPOINT ["/podcidr-bgp"]
CMD ["speaker", "--config-source", "kubernetes"]
