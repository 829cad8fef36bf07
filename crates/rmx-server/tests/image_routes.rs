//! Images through the HTTP surfaces (issue #27), over a real TCP port: OpenAI `image_url` data
//! URIs (and the Responses API's `input_image`), Ollama's base64 `images` (`/api/chat`, `/api/generate`) and Anthropic's base64 image
//! blocks reach the tiny Gemma 3 vision-language model (tests/py/tiny_vlm.py). The same image
//! and text give the same greedy answer on every surface (and streamed), another image another
//! answer, and the image's placeholders count as prompt tokens. Bad input is a 400 in each
//! API's own shape: a file that is no image, a truncated one, a decompression bomb (a huge
//! size in a small PNG header), too many images, a URL to fetch, an image for a text-only model.

#![allow(clippy::unwrap_used)]

mod common_api;

use std::io::Cursor;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use common_api::{app, chat_stream, model_name, raw_request, serve_service, service, stream};
use rmx_server::service::MAX_IMAGES_PER_REQUEST;
use serde_json::{json, Value};

/// Placeholders per image in the tiny VLM (`mm_tokens_per_image`).
const PER_IMAGE: u64 = 16;
const MAX_TOKENS: u64 = 8;
const QUESTION: &str = "What is in this picture?";

/// The tiny VLM, made once per version of its generator (rmx_tests::models::tiny_vlm).
fn vlm() -> String {
    rmx_tests::models::tiny_vlm("f32")
        .to_string_lossy()
        .into_owned()
}

fn png(img: image::RgbImage) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

fn noise() -> Vec<u8> {
    png(rmx_tests::images::noise(45, 61, 777))
}

fn bands() -> Vec<u8> {
    png(rmx_tests::images::bands(70, 20))
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A small PNG whose header claims 100000 x 100000 pixels (CRC fixed): a bomb before inflation.
fn bomb() -> Vec<u8> {
    let mut png = bands();
    png[16..20].copy_from_slice(&100_000u32.to_be_bytes());
    png[20..24].copy_from_slice(&100_000u32.to_be_bytes());
    let crc = crc32(&png[12..29]);
    png[29..33].copy_from_slice(&crc.to_be_bytes());
    png
}

fn b64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

fn openai(model: &str, images: &[Vec<u8>]) -> Value {
    let mut content: Vec<Value> = images
        .iter()
        .map(|i| json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{}", b64(i))}}))
        .collect();
    content.push(json!({"type": "text", "text": QUESTION}));
    json!({"model": model, "messages": [{"role": "user", "content": content}],
           "temperature": 0, "max_tokens": MAX_TOKENS})
}

fn responses(model: &str, images: &[Vec<u8>]) -> Value {
    let mut content: Vec<Value> = images
        .iter()
        .map(|i| json!({"type": "input_image", "image_url": format!("data:image/png;base64,{}", b64(i))}))
        .collect();
    content.push(json!({"type": "input_text", "text": QUESTION}));
    json!({"model": model, "input": [{"role": "user", "content": content}],
           "temperature": 0, "max_output_tokens": MAX_TOKENS})
}

fn ollama_chat(model: &str, images: &[Vec<u8>]) -> Value {
    let images: Vec<String> = images.iter().map(|i| b64(i)).collect();
    json!({"model": model, "stream": false,
           "messages": [{"role": "user", "content": QUESTION, "images": images}],
           "options": {"temperature": 0, "num_predict": MAX_TOKENS}})
}

fn ollama_generate(model: &str, images: &[Vec<u8>]) -> Value {
    let images: Vec<String> = images.iter().map(|i| b64(i)).collect();
    json!({"model": model, "stream": false, "prompt": QUESTION, "images": images,
           "options": {"temperature": 0, "num_predict": MAX_TOKENS}})
}

fn anthropic(model: &str, images: &[Vec<u8>]) -> Value {
    let mut content: Vec<Value> = images
        .iter()
        .map(|i| json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(i)}}))
        .collect();
    content.push(json!({"type": "text", "text": QUESTION}));
    json!({"model": model, "messages": [{"role": "user", "content": content}],
           "temperature": 0, "max_tokens": MAX_TOKENS})
}

async fn post(base: &str, path: &str, body: &Value) -> (u16, Value) {
    let (status, text) = raw_request(base, "POST", path, &body.to_string()).await;
    let v = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{path}: not JSON: {text}"));
    (status, v)
}

/// (answer, prompt tokens) of a whole answer on each surface.
async fn answers(base: &str, model: &str, images: &[Vec<u8>]) -> Vec<(String, u64)> {
    let (s, o) = post(base, "/v1/chat/completions", &openai(model, images)).await;
    assert_eq!(s, 200, "{o}");
    let (s, c) = post(base, "/api/chat", &ollama_chat(model, images)).await;
    assert_eq!(s, 200, "{c}");
    let (s, g) = post(base, "/api/generate", &ollama_generate(model, images)).await;
    assert_eq!(s, 200, "{g}");
    let (s, a) = post(base, "/v1/messages", &anthropic(model, images)).await;
    assert_eq!(s, 200, "{a}");
    let (s, r) = post(base, "/v1/responses", &responses(model, images)).await;
    assert_eq!(s, 200, "{r}");
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let said = r["output"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["type"] == "message")
        .map(|o| text(&o["content"][0]["text"]))
        .unwrap_or_default();
    let count = |v: &Value| v.as_u64().unwrap_or_default();
    vec![
        (
            text(&o["choices"][0]["message"]["content"]),
            count(&o["usage"]["prompt_tokens"]),
        ),
        (said, count(&r["usage"]["input_tokens"])),
        (
            text(&c["message"]["content"]),
            count(&c["prompt_eval_count"]),
        ),
        (text(&g["response"]), count(&g["prompt_eval_count"])),
        // Anthropic counts the prompt read from the prefix cache apart.
        (
            text(&a["content"][0]["text"]),
            count(&a["usage"]["input_tokens"]) + count(&a["usage"]["cache_read_input_tokens"]),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_27_an_image_reaches_the_model_on_every_surface() {
    let home = tempfile::tempdir().unwrap();
    let svc = service(home.path());
    let served = serve_service(svc.clone());
    let base = served.base.clone();
    let router = app(svc);
    let model = vlm();

    let plain = answers(&base, &model, &[]).await;
    let one = answers(&base, &model, &[noise()]).await;
    let other = answers(&base, &model, &[bands()]).await;
    let two = answers(&base, &model, &[noise(), bands()]).await;
    for (name, got) in [("noise", &one), ("bands", &other), ("two", &two)] {
        // OpenAI chat and Responses, Ollama chat and generate and Anthropic render the same
        // user turn.
        assert!(
            got.iter().all(|a| a == &got[0]),
            "{name}: the surfaces disagree: {got:?}"
        );
        assert!(!got[0].0.is_empty(), "{name}: an empty answer");
    }
    assert!(plain.iter().all(|a| a == &plain[0]), "{plain:?}");
    // Each image takes its placeholders (and its begin/end markers) in the prompt.
    let per_image = one[0].1 - plain[0].1;
    assert!(per_image >= PER_IMAGE, "{one:?} vs {plain:?}");
    assert_eq!(other[0].1, one[0].1, "two images of the same tokens' cost");
    assert_eq!(two[0].1, plain[0].1 + 2 * per_image);
    // Streamed, the same answer.
    let sse = stream(&router, "/v1/chat/completions", openai(&model, &[noise()])).await;
    assert_eq!(chat_stream(&sse).content, one[0].0, "{sse}");
    // The model sees the pixels: another image, another answer.
    assert_ne!(
        one[0].0, other[0].0,
        "the answer does not depend on the image"
    );
    assert_ne!(one[0].0, plain[0].0);
}

/// Mistral Small 3.1's images keep their sizes: the same answer on every surface, and each
/// image costs its own grid (merged patches of 8 pixels, within 64 a side) of `[IMG]`, an
/// `[IMG_BREAK]` after each row but the last, an `[IMG_END]`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_27_mistral3_images_cost_their_own_rows_on_every_surface() {
    let home = tempfile::tempdir().unwrap();
    let served = serve_service(service(home.path()));
    let model = rmx_tests::models::tiny_vlm_of("mistral3", "f32")
        .to_string_lossy()
        .into_owned();
    let plain = answers(&served.base, &model, &[]).await;
    let one = answers(&served.base, &model, &[noise()]).await;
    let other = answers(&served.base, &model, &[bands()]).await;
    let two = answers(&served.base, &model, &[noise(), bands()]).await;
    for (name, got) in [("noise", &one), ("bands", &other), ("two", &two)] {
        assert!(
            got.iter().all(|a| a == &got[0]),
            "{name}: the surfaces disagree: {got:?}"
        );
    }
    // noise: 45x61 -> 48x64 pixels, 8 rows of 6; bands: 70x20 -> 64x24, 3 rows of 8.
    let (noise_cost, bands_cost) = (8 * 6 + 7 + 1, 3 * 8 + 2 + 1);
    assert_eq!(one[0].1, plain[0].1 + noise_cost, "{one:?} vs {plain:?}");
    assert_eq!(other[0].1, plain[0].1 + bands_cost, "{other:?}");
    assert_eq!(two[0].1, plain[0].1 + noise_cost + bands_cost, "{two:?}");
    assert_ne!(
        one[0].0, other[0].0,
        "the answer does not depend on the image"
    );
}

/// The message of an error in `path`'s API shape.
fn message(path: &str, v: &Value) -> String {
    let m = match path {
        "/v1/chat/completions" | "/v1/responses" | "/v1/messages" => &v["error"]["message"],
        _ => &v["error"],
    };
    m.as_str()
        .unwrap_or_else(|| panic!("{path}: not its error shape: {v}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_27_bad_images_are_a_400_in_each_apis_shape() {
    let home = tempfile::tempdir().unwrap();
    let served = serve_service(service(home.path()));
    let base = served.base.clone();
    let model = vlm();
    let text_model = model_name();
    let good = bands();
    let truncated = good[..good.len() / 2].to_vec();
    let many = vec![good.clone(); MAX_IMAGES_PER_REQUEST + 1];
    let cases: Vec<(&str, Vec<Vec<u8>>, &str, &str)> = vec![
        (
            "no image",
            vec![b"plain text, not a picture".to_vec()],
            &model,
            "not PNG, JPEG, WebP or GIF",
        ),
        ("truncated", vec![truncated], &model, "could not be decoded"),
        ("bomb", vec![bomb()], &model, "100000x100000 pixels"),
        ("too many", many, &model, "over the limit of 8 per request"),
        (
            "text-only model",
            vec![good.clone()],
            &text_model,
            "takes no images",
        ),
    ];
    for (name, images, model, says) in &cases {
        for (path, body) in [
            ("/v1/chat/completions", openai(model, images)),
            ("/v1/responses", responses(model, images)),
            ("/api/chat", ollama_chat(model, images)),
            ("/api/generate", ollama_generate(model, images)),
            ("/v1/messages", anthropic(model, images)),
        ] {
            let (status, v) = post(&base, path, &body).await;
            assert_eq!(status, 400, "{name} on {path}: {v}");
            let msg = message(path, &v);
            assert!(msg.contains(says), "{name} on {path}: {msg}");
            if *name == "text-only model" {
                assert!(msg.contains(*model), "{name} on {path}: {msg}");
            }
        }
    }
    let url = json!({"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}]});
    let (status, v) = post(&base, "/v1/chat/completions", &url).await;
    assert_eq!(status, 400, "{v}");
    assert!(message("/v1/chat/completions", &v).contains("URL fetching is not enabled"));
    assert_eq!(v["error"]["param"], "messages[0].content[0].image_url");
    let url = json!({"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}]}]});
    let (status, v) = post(&base, "/v1/messages", &url).await;
    assert_eq!(status, 400, "{v}");
    assert!(message("/v1/messages", &v).contains("URL fetching is not enabled"));
    // The daemon still answers after all that.
    let (status, v) = post(&base, "/v1/chat/completions", &openai(&model, &[good])).await;
    assert_eq!(status, 200, "{v}");
}

/// An HTTP server of fixed files on 127.0.0.1: `(path, content type, body)`; any other path is
/// a 404. Its base URL.
async fn serve_files(files: Vec<(&'static str, &'static str, Vec<u8>)>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let files = files.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let n = sock.read(&mut buf).await.unwrap_or(0);
                let req = String::from_utf8_lossy(&buf[..n]).to_string();
                let path = req.split_whitespace().nth(1).unwrap_or("/").to_string();
                let reply = match files.iter().find(|(p, _, _)| *p == path) {
                    Some((_, kind, body)) => {
                        let head = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
                             Connection: close\r\n\r\n",
                            body.len()
                        );
                        [head.into_bytes(), body.clone()].concat()
                    }
                    None => {
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_vec()
                    }
                };
                let _ = sock.write_all(&reply).await;
            });
        }
    });
    base
}

/// Where the daemon fetches image URLs (`RMX_IMAGE_URLS=1`): an image named by an http URL
/// gives the answer the same image gives inline, on OpenAI chat, Responses and Anthropic; a URL
/// that holds no image, or none at all, is a 400 in the API's shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_27_image_urls_are_fetched_where_the_daemon_allows_it() {
    let home = tempfile::tempdir().unwrap();
    let mut config = common_api::config(home.path(), Vec::new());
    config.image_urls = Some(rmx_server::service::ImageFetcher::new());
    let served = serve_service(rmx_server::service::Service::new(config));
    let base = served.base.clone();
    let model = vlm();
    let img = noise();
    let files = serve_files(vec![
        ("/cat.png", "image/png", img.clone()),
        ("/page", "text/html", b"<html></html>".to_vec()),
    ])
    .await;
    let by_url = |url: &str| {
        let mut o = openai(&model, std::slice::from_ref(&img));
        o["messages"][0]["content"][0]["image_url"]["url"] = json!(url);
        let mut r = responses(&model, std::slice::from_ref(&img));
        r["input"][0]["content"][0]["image_url"] = json!(url);
        let mut a = anthropic(&model, std::slice::from_ref(&img));
        a["messages"][0]["content"][0]["source"] = json!({"type": "url", "url": url});
        [
            ("/v1/chat/completions", o),
            ("/v1/responses", r),
            ("/v1/messages", a),
        ]
    };
    let (s, inline) = post(
        &base,
        "/v1/chat/completions",
        &openai(&model, std::slice::from_ref(&img)),
    )
    .await;
    assert_eq!(s, 200, "{inline}");
    let [(_, o), (_, r), (_, a)] = by_url(&format!("{files}/cat.png"));
    let (s, o) = post(&base, "/v1/chat/completions", &o).await;
    assert_eq!(s, 200, "{o}");
    assert_eq!(
        o["choices"][0]["message"]["content"],
        inline["choices"][0]["message"]["content"]
    );
    assert_eq!(
        o["usage"]["prompt_tokens"],
        inline["usage"]["prompt_tokens"]
    );
    let (s, r) = post(&base, "/v1/responses", &r).await;
    assert_eq!(s, 200, "{r}");
    let said = r["output"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["type"] == "message")
        .map(|o| o["content"][0]["text"].clone());
    assert_eq!(
        said,
        Some(inline["choices"][0]["message"]["content"].clone())
    );
    let (s, a) = post(&base, "/v1/messages", &a).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(
        a["content"][0]["text"],
        inline["choices"][0]["message"]["content"]
    );
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/cat.png", l.local_addr().unwrap())
    };
    for (url, says) in [
        (format!("{files}/page"), "not an image"),
        (format!("{files}/missing.png"), "HTTP 404"),
        (closed, "could not be fetched"),
    ] {
        for (path, body) in by_url(&url) {
            let (status, v) = post(&base, path, &body).await;
            assert_eq!(status, 400, "{url} on {path}: {v}");
            let msg = message(path, &v);
            assert!(msg.contains(says), "{url} on {path}: {msg}");
        }
    }
}
