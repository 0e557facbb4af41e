//! The web console (issue 32 item 1): HTML, CSS and JavaScript modules embedded in the
//! binary (`include_bytes!`; no build step, no CDN) and served at `/console/` on the
//! admin listener. docs/operations.md, "The web console".
//!
//! The assets are the same bytes for every visitor and carry no data, so the guard
//! lets `GET`/`HEAD` of `/console/...` through without credentials (the `Host` check
//! still applies: [`super::guard::Guard::check`]). Everything the pages show comes from
//! the JSON endpoints under `/v1/`, which the pages call with `Authorization: Bearer`
//! from a token the operator types into the login form and the browser keeps in
//! `sessionStorage` (never in a URL, so never in a log line or a `Referer`).
//!
//! Every asset is answered with a Content-Security-Policy that allows scripts, styles,
//! images and fetches from the listener itself only (`default-src 'self'`, no inline
//! script or style), `frame-ancestors 'none'` (no framing, so no click-jacking),
//! `nosniff` and `no-referrer`.

use axum::{
    extract::Path,
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Redirect, Response},
};

/// The path prefix the console is served under.
pub const PREFIX: &str = "/console/";

/// The policy every console response carries (module docs).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One embedded file: its path under [`PREFIX`], media type and bytes.
pub struct Asset {
    /// Path under `/console/` (`""` is the page itself).
    pub path: &'static str,
    /// `Content-Type`.
    pub media_type: &'static str,
    /// The file.
    pub bytes: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $file:literal, $media:expr) => {
        Asset {
            path: $path,
            media_type: $media,
            bytes: include_bytes!(concat!("assets/", $file)),
        }
    };
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// Every file of the console.
pub static ASSETS: &[Asset] = &[
    asset!("", "index.html", HTML),
    asset!("console.css", "console.css", CSS),
    asset!("app.js", "app.js", JS),
    asset!("api.js", "api.js", JS),
    asset!("dom.js", "dom.js", JS),
    asset!("spark.js", "spark.js", JS),
    asset!("pages/overview.js", "pages/overview.js", JS),
    asset!("pages/topics.js", "pages/topics.js", JS),
    asset!("pages/groups.js", "pages/groups.js", JS),
    asset!("pages/group.js", "pages/group.js", JS),
    asset!("pages/transactions.js", "pages/transactions.js", JS),
    asset!("favicon.svg", "favicon.svg", "image/svg+xml"),
];

/// The asset at `path` (under [`PREFIX`]), if there is one.
pub fn find(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.path == path)
}

/// Whether `path` is one of the console's (the guard's public reads).
pub fn is_console_path(path: &str) -> bool {
    path == "/console" || path.starts_with(PREFIX)
}

/// `GET /console`: to `/console/`, so relative module paths resolve.
pub async fn redirect() -> Redirect {
    Redirect::permanent(PREFIX)
}

/// `GET /console/`: the page.
pub async fn index() -> Response {
    serve("")
}

/// `GET /console/{*file}`: an asset, or 404.
pub async fn file(Path(path): Path<String>) -> Response {
    serve(&path)
}

fn serve(path: &str) -> Response {
    let mut response = match find(path) {
        Some(asset) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.media_type),
            )],
            asset.bytes,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such console file").into_response(),
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(asset: &Asset) -> &'static str {
        std::str::from_utf8(asset.bytes).expect("console assets are UTF-8")
    }

    #[test]
    fn every_asset_is_served_with_its_type_and_the_policy() {
        for asset in ASSETS {
            let response = serve(asset.path);
            assert_eq!(response.status(), StatusCode::OK, "{}", asset.path);
            let h = response.headers();
            assert_eq!(h[header::CONTENT_TYPE], asset.media_type);
            assert_eq!(h[header::CONTENT_SECURITY_POLICY], CONTENT_SECURITY_POLICY);
            assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        }
        let missing = serve("../secret");
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
        assert_eq!(
            missing.headers()[header::CONTENT_SECURITY_POLICY],
            CONTENT_SECURITY_POLICY
        );
    }

    #[test]
    fn the_page_has_no_inline_script_or_style() {
        let page = text(find("").unwrap());
        for (i, _) in page.match_indices("<script") {
            let tag = &page[i..i + page[i..].find('>').unwrap()];
            assert!(tag.contains("src="), "inline script: {tag}");
        }
        for forbidden in ["<style", " style=", " onclick=", " onload=", "javascript:"] {
            assert!(!page.contains(forbidden), "{forbidden}");
        }
        for asset in ASSETS.iter().filter(|a| a.media_type == JS) {
            let code = text(asset);
            for forbidden in ["innerHTML", "eval(", "new Function", "document.write"] {
                assert!(!code.contains(forbidden), "{}: {forbidden}", asset.path);
            }
        }
    }

    #[test]
    fn every_module_an_asset_imports_is_embedded() {
        for asset in ASSETS
            .iter()
            .filter(|a| a.media_type == JS || a.media_type == HTML)
        {
            let dir = asset.path.rsplit_once('/').map_or("", |(d, _)| d);
            for piece in text(asset).split(['"', '\'']) {
                let Some(rel) = piece
                    .strip_prefix("./")
                    .or_else(|| piece.strip_prefix("../").map(|_| piece))
                else {
                    continue;
                };
                if !rel.ends_with(".js") && !rel.ends_with(".css") {
                    continue;
                }
                let resolved = match piece.strip_prefix("../") {
                    Some(up) => up.to_owned(),
                    None if dir.is_empty() => rel.to_owned(),
                    None => format!("{dir}/{rel}"),
                };
                assert!(find(&resolved).is_some(), "{} imports {piece}", asset.path);
            }
        }
    }

    #[test]
    fn console_paths() {
        assert!(is_console_path("/console"));
        assert!(is_console_path("/console/pages/group.js"));
        assert!(!is_console_path("/consoles"));
        assert!(!is_console_path("/v1/groups"));
    }
}
