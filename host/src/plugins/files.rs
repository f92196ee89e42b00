//! Reading files of the plugins directory, which are untrusted: never through a link, never more
//! than a bound, and never quoted back in an error.

use std::path::Path;

/// Read a file of the plugins directory: a regular file, never through a symbolic link, at most
/// `max` bytes (checked before reading). None when there is no such file.
pub(super) fn read_plugin_file(path: &Path, max: u64) -> std::result::Result<Option<Vec<u8>>, String> {
    use std::io::Read;
    let shown = path.display();
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {shown}: {e}")),
    };
    if meta.file_type().is_symlink() {
        return Err(format!("{shown} is a symbolic link: nothing in the plugins directory is followed through links"));
    }
    let too_large = |len: u64| format!("{shown} is {len} bytes, over the limit of {max} bytes");
    if !meta.is_file() {
        return Err(format!("{shown} is not a regular file"));
    }
    if meta.len() > max {
        return Err(too_large(meta.len()));
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Swapped for a link or a FIFO since the check above: refuse, and never block.
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(format!("{shown} is not a regular file"));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read {shown}: {e}"))?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(Some(bytes))
}

/// A manifest's parse error without quoting the manifest: the message with quoted values left
/// out, and where it is.
pub(super) fn toml_error(e: &toml::de::Error, text: &str) -> String {
    let mut message = String::new();
    let mut quoted = false;
    for c in e.message().trim().chars() {
        if c == '"' {
            quoted = !quoted;
            if quoted {
                message.push_str("\"…\"");
            }
        } else if !quoted {
            message.push(c);
        }
    }
    let message = crate::text::bounded(&crate::text::one_line(&message), 300, "…");
    match e.span() {
        Some(span) => {
            let before = &text.as_bytes()[..span.start.min(text.len())];
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
            format!("{message} (line {line}, column {column})")
        }
        None => message,
    }
}
