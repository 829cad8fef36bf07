//! Issue #20: models `rmx import` made (a folder under `$RMX_HOME/models` with a user alias)
//! are listed on `/api/tags` and `/v1/models` as `rmx ls` lists them, and `/api/delete`
//! removes them with their alias as `rmx rm` does, unloading them first. A folder a user alias
//! names elsewhere is listed too, but it is the user's own: deleting it is refused and it stays.

mod common_api;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common_api::{app, call, get, json, linked_model, service};
use rmx_store::ModelHints;
use serde_json::{json, Value};
use tower::ServiceExt;

async fn send(app: &axum::Router, req: Request<Body>) -> (StatusCode, Value) {
    json(app.clone().oneshot(req).await.expect("response")).await
}

fn delete(model: &str) -> Request<Body> {
    Request::delete("/api/delete")
        .header("content-type", "application/json")
        .body(Body::from(json!({ "model": model }).to_string()))
        .expect("request")
}

fn names(list: &Value, field: &str) -> Vec<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .filter_map(|m| m[field].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn issue_20_imported_models_are_listed_and_deleted_as_the_cli_does() {
    let home = tempfile::tempdir().expect("tempdir");
    let svc = service(home.path());
    let app = app(svc.clone());
    let store = svc.store();
    let imported = linked_model(&store.imports_dir().join("tiny-import"));
    let own = linked_model(&home.path().join("elsewhere/mine"));
    for (name, dir) in [("tiny-import", &imported), ("mine", &own)] {
        store
            .add_alias(name, &dir.display().to_string(), ModelHints::default())
            .expect("alias");
    }

    let (status, tags) = send(&app, get("/api/tags")).await;
    assert_eq!(status, StatusCode::OK, "{tags}");
    let listed = names(&tags["models"], "name");
    assert!(listed.contains(&"tiny-import".to_string()), "{tags}");
    assert!(listed.contains(&"mine".to_string()), "{tags}");
    let entry = tags["models"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["name"] == "tiny-import"))
        .expect("the import's entry");
    assert_eq!(entry["details"]["family"], "qwen3", "{entry}");
    assert_eq!(entry["complete"], true, "{entry}");
    let (status, models) = send(&app, get("/v1/models")).await;
    assert_eq!(status, StatusCode::OK, "{models}");
    let ids = names(&models["data"], "id");
    assert!(ids.contains(&"tiny-import".to_string()), "{models}");
    assert!(ids.contains(&"mine".to_string()), "{models}");

    // The user's own folder is refused, and stays with its alias.
    let (status, body) = send(&app, delete("mine")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(own.join("config.json").exists());
    assert!(store.aliases().expect("aliases").get("mine").is_some());

    // A loaded import is unloaded, then removed with its alias.
    let (status, body) = call(
        &app,
        "/api/generate",
        json!({"model": "tiny-import", "keep_alive": "5m"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = send(&app, delete("tiny-import")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(!imported.exists(), "the imported folder is gone");
    assert!(store
        .aliases()
        .expect("aliases")
        .get("tiny-import")
        .is_none());
    let (_, ps) = send(&app, get("/api/ps")).await;
    assert_eq!(ps["models"], json!([]), "{ps}");
    let (_, tags) = send(&app, get("/api/tags")).await;
    assert_eq!(names(&tags["models"], "name"), vec!["mine".to_string()]);
    let (status, body) = send(&app, delete("tiny-import")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}
