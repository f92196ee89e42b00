//! Where logs and spans go: log lines to stderr (text or JSON, filtered by `--log`), and, with
//! `--otlp URL` (cargo feature `otlp`), taskhost's spans (each run is one, see
//! `runner::execute`) to an OpenTelemetry collector over OTLP/HTTP, whatever the log filter.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use super::{Cli, Command, LogFormat};

/// Longest the spans still buffered may take to leave at exit: a stop stays within its grace
/// even when the collector is gone.
#[cfg(feature = "otlp")]
const FLUSH: std::time::Duration = std::time::Duration::from_secs(2);

/// Kept until the process ends: dropping it sends the spans still buffered.
pub struct Telemetry {
    #[cfg(feature = "otlp")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        #[cfg(feature = "otlp")]
        if let Some(provider) = self.provider.take() {
            if let Err(e) = provider.shutdown_with_timeout(FLUSH) {
                eprintln!("warning: spans not sent to the OTLP collector: {e}");
            }
        }
    }
}

type Boxed = Box<dyn Layer<Registry> + Send + Sync>;

pub fn init(cli: &Cli) -> anyhow::Result<Telemetry> {
    // sqlx logs each statement and the server's notices ("relation _sqlx_migrations already
    // exists, skipping") at info: quiet unless the filter names it.
    // A command that ends (deploy, add) says what failed in its one line; sqlx's own warnings
    // (a connection found broken) are for the logs of the long-running ones.
    let long_running = matches!(cli.command, Command::Worker(_) | Command::Serve { .. } | Command::Overseer { .. });
    let sqlx = if long_running { "sqlx=warn" } else { "sqlx=error" };
    let mut wanted = if cli.log.contains("sqlx") { cli.log.clone() } else { format!("{},{sqlx}", cli.log) };
    // wasi:http warns of each connection a guest's request could not make, naming no run: the
    // run's outcome says it, and a guest must not fill the worker's log.
    if !cli.log.contains("wasmtime_wasi_http") {
        wanted.push_str(",wasmtime_wasi_http=error");
    }
    let filter = EnvFilter::try_new(&wanted).unwrap_or_else(|_| EnvFilter::new("warn"));
    // Colours only for a terminal: logs piped to a file or a collector stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs: Boxed = match cli.log_format {
        LogFormat::Text => logs.with_ansi(ansi).boxed(),
        LogFormat::Json => logs.json().boxed(),
    };
    #[cfg(feature = "otlp")]
    if let Some(url) = &cli.otlp {
        // Spans go to the collector whatever the log filter: each layer filters for itself.
        let (spans, provider) = otlp::layer(url)?;
        tracing_subscriber::registry().with(vec![logs.with_filter(filter).boxed(), spans]).init();
        return Ok(Telemetry { provider: Some(provider) });
    }
    // One filter for the whole subscriber: a filter of the log layer alone dropped the event
    // that came right after one it filtered out (a statement sqlx logs, say).
    tracing_subscriber::registry().with(logs).with(filter).init();
    let telemetry = Telemetry {
        #[cfg(feature = "otlp")]
        provider: None,
    };
    Ok(telemetry)
}

#[cfg(feature = "otlp")]
mod otlp {
    use opentelemetry::trace::TracerProvider;
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use opentelemetry_sdk::Resource;
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::Layer;

    use super::Boxed;

    /// Spans of taskhost at `info` and above, batched to `url`'s `/v1/traces` as OTLP/HTTP JSON.
    pub fn layer(url: &str) -> anyhow::Result<(Boxed, SdkTracerProvider)> {
        let endpoint = format!("{}/v1/traces", url.trim_end_matches('/'));
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpJson)
            .with_endpoint(&endpoint)
            .build()
            .map_err(|e| anyhow::anyhow!("--otlp {url}: {e}"))?;
        // The service is `taskhost` unless OTEL_SERVICE_NAME names it (the builder reads it).
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("taskhost");
        }
        let resource = resource.build();
        let provider = SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build();
        let layer = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("taskhost"))
            .with_filter(Targets::new().with_target("taskhost", tracing::Level::INFO))
            .boxed();
        Ok((layer, provider))
    }
}
