# Multi-stage build of a static, non-root podcidr-bgp image.
# (Cannot be built in this project's CI: no container engine runs there.)
FROM rust:1.95-bookworm AS build
RUN rustup target add x86_64-unknown-linux-musl \
 && apt-get update && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked --target x86_64-unknown-linux-musl -p podcidr-bgp \
 && strip target/x86_64-unknown-linux-musl/release/podcidr-bgp

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/target/x86_64-unknown-linux-musl/release/podcidr-bgp /podcidr-bgp
USER 65532:65532
ENTRYPOINT ["/podcidr-bgp"]
CMD ["speaker", "--config", "/etc/podcidr/config/config.yaml"]
