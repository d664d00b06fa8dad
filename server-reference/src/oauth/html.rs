//! The minimal HTML of the consent and verification pages, which no other site may frame and
//! which load nothing.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

/// A page with `title` and already-escaped `body`.
pub fn render(status: StatusCode, title: &str, body: &str) -> Response {
    let title = escape(title);
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title></head>\n\
         <body><h1>{title}</h1>\n{body}\n</body></html>\n"
    );
    let headers = [
        (header::X_FRAME_OPTIONS, "DENY"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
        ),
    ];
    (status, headers, Html(html)).into_response()
}

/// The cookie that carries a form's CSRF token; the form carries it too.
const CSRF_COOKIE: &str = "intent_csrf";

/// A fresh CSRF token: put it in the form with [`csrf_field`] and send the page with
/// [`with_csrf_cookie`].
pub fn csrf_token() -> String {
    crate::random::id("csrf")
}

/// The hidden field of `token`.
pub fn csrf_field(token: &str) -> String {
    hidden("csrf", token)
}

/// `page` with the cookie of `token`: sent back only by this site's own forms (SameSite=Strict),
/// never readable by script.
pub fn with_csrf_cookie(mut page: Response, token: &str) -> Response {
    let cookie = format!("{CSRF_COOKIE}={token}; Path=/api/auth; HttpOnly; SameSite=Strict");
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        page.headers_mut().insert(header::SET_COOKIE, value);
    }
    page
}

/// Whether a POST carries the same CSRF token in its form (`submitted`) and its cookie: a form
/// posted from another site lacks the cookie, and a forged one cannot know the token.
pub fn csrf_ok(headers: &HeaderMap, submitted: Option<&str>) -> bool {
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| {
            pair.trim()
                .strip_prefix(&format!("{CSRF_COOKIE}="))
                .map(str::to_owned)
        });
    matches!((cookie, submitted), (Some(cookie), Some(form)) if !form.is_empty() && cookie == form)
}

/// The answer to a POST whose CSRF token is missing or does not match.
pub fn csrf_refused() -> Response {
    render(
        StatusCode::FORBIDDEN,
        "Form expired",
        "<p>This form expired or was sent from another site. Reload the page and try again.</p>",
    )
}

/// A hidden form field.
pub fn hidden(name: &str, value: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
        escape(name),
        escape(value)
    )
}

/// Escapes text for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_csrf_token_passes_only_with_its_own_cookie() {
        let with_cookie = |cookie: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::COOKIE, cookie.parse().unwrap());
            headers
        };
        let headers = with_cookie("other=1; intent_csrf=csrf_abc");
        assert!(csrf_ok(&headers, Some("csrf_abc")));
        assert!(!csrf_ok(&headers, Some("csrf_xyz")));
        assert!(!csrf_ok(&headers, None));
        assert!(!csrf_ok(&HeaderMap::new(), Some("csrf_abc")));
        assert!(!csrf_ok(&with_cookie("intent_csrf="), Some("")));
    }

    #[test]
    fn markup_is_escaped() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
