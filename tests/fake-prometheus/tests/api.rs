//! The fake asked as any client asks Prometheus (ureq, as the job view
//! does): both endpoints by GET and POST, the answers' shapes, the
//! refusals of bad parameters, credentials, TLS and the faults.

use fake_prometheus::{refused_url, ErrorType, FakePrometheus, Reply, Sample, Series, TestCa};
use serde_json::{json, Value};
use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

fn get(url: &str) -> (u16, String) {
    match ureq::get(url).call() {
        Ok(r) => (r.status(), r.into_string().unwrap()),
        Err(ureq::Error::Status(code, r)) => (code, r.into_string().unwrap()),
        Err(e) => panic!("{url}: {e}"),
    }
}

fn post(url: &str, form: &[(&str, &str)]) -> (u16, String) {
    match ureq::post(url).send_form(form) {
        Ok(r) => (r.status(), r.into_string().unwrap()),
        Err(ureq::Error::Status(code, r)) => (code, r.into_string().unwrap()),
        Err(e) => panic!("{url}: {e}"),
    }
}

fn up() -> Vec<Sample> {
    vec![Sample::new(
        [("__name__", "up"), ("job", "node"), ("instance", "n1:9100")],
        1.0,
    )]
}

#[test]
fn an_instant_query_by_get_or_post_is_a_vector_at_its_time() {
    let prom = FakePrometheus::builder()
        .answer(|r| {
            if r.query() == "up" {
                Reply::vector(up())
            } else {
                Reply::empty()
            }
        })
        .start();
    let (code, body) = get(&format!(
        "{}/api/v1/query?query=up&time=2015-07-01T20:10:51.781Z",
        prom.url()
    ));
    assert_eq!(code, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v,
        json!({"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"__name__": "up", "instance": "n1:9100", "job": "node"},
             "value": [1435781451.781, "1"]}
        ]}})
    );
    let (code, body) = post(
        &format!("{}/api/v1/query", prom.url()),
        &[("query", "up"), ("time", "1790000000")],
    );
    assert_eq!(code, 200);
    assert!(body.contains(r#""value":[1790000000,"1"]"#), "{body}");
    // The envelope's keys in Prometheus's order, as on its wire.
    let (_, body) = get(&format!("{}/api/v1/query?query=down", prom.url()));
    assert_eq!(
        body,
        r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#
    );
    let asked = prom.requests();
    assert_eq!(asked.len(), 3);
    assert!(!asked[0].is_form_post() && asked[0].method == "GET");
    assert!(asked[1].is_form_post());
    assert_eq!(prom.queries(), ["up", "up", "down"]);
}

#[test]
fn a_range_query_is_a_matrix_at_each_step() {
    let prom = FakePrometheus::answering(Reply::vector(up()));
    let (code, body) = post(
        &format!("{}/api/v1/query_range", prom.url()),
        &[
            ("query", "up"),
            ("start", "1790000000"),
            ("end", "1790000030"),
            ("step", "15s"),
        ],
    );
    assert_eq!(code, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["data"]["resultType"], "matrix");
    assert_eq!(
        v["data"]["result"][0]["values"],
        json!([[1790000000, "1"], [1790000015, "1"], [1790000030, "1"]])
    );
    // A range vector given as it is.
    let prom = FakePrometheus::answering(Reply::matrix(vec![Series::new(
        [("__name__", "up")],
        [(1790000000.5, 1.0), (1790000001.0, f64::NAN)],
    )]));
    let (_, body) = get(&format!("{}/api/v1/query?query=up[1m]", prom.url()));
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["data"]["result"][0]["values"],
        json!([[1790000000.5, "1"], [1790000001, "NaN"]])
    );
}

#[test]
fn scalars_strings_and_warnings_have_the_apis_shapes() {
    let prom = FakePrometheus::answering(Reply::scalar(f64::INFINITY).warn("careful"));
    let (_, body) = get(&format!("{}/api/v1/query?query=1/0&time=10", prom.url()));
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v,
        json!({"status": "success", "data": {"resultType": "scalar", "result": [10, "+Inf"]},
               "warnings": ["careful"]})
    );
}

#[test]
fn bad_parameters_are_refused_as_prometheus_refuses_them() {
    let prom = FakePrometheus::answering(Reply::vector(up()));
    let url = prom.url();
    for (path, form, says) in [
        (
            "query",
            vec![],
            "invalid parameter \"query\": 1:1: parse error: no expression found in input",
        ),
        (
            "query",
            vec![("query", "up"), ("time", "soon")],
            "invalid parameter \"time\": cannot parse \"soon\" to a valid timestamp",
        ),
        (
            "query_range",
            vec![("query", "up")],
            "invalid parameter \"start\": cannot parse \"\" to a valid timestamp",
        ),
        (
            "query_range",
            vec![
                ("query", "up"),
                ("start", "10"),
                ("end", "5"),
                ("step", "1"),
            ],
            "invalid parameter \"end\": end timestamp must not be before start time",
        ),
        (
            "query_range",
            vec![("query", "up"), ("start", "0"), ("end", "5"), ("step", "0")],
            "zero or negative query resolution step widths are not accepted",
        ),
        (
            "query_range",
            vec![
                ("query", "up"),
                ("start", "0"),
                ("end", "86400"),
                ("step", "1s"),
            ],
            "exceeded maximum resolution of 11,000 points per timeseries",
        ),
    ] {
        let (code, body) = post(&format!("{url}/api/v1/{path}"), &form);
        assert_eq!(code, 400, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (v["status"].as_str(), v["errorType"].as_str()),
            (Some("error"), Some("bad_data"))
        );
        assert!(v["error"].as_str().unwrap().contains(says), "{body}");
    }
    assert_eq!(get(&format!("{url}/api/v1/labels")).0, 404);
    assert_eq!(
        ureq::put(&format!("{url}/api/v1/query"))
            .call()
            .unwrap_err()
            .into_response()
            .unwrap()
            .status(),
        405
    );
}

#[test]
fn each_error_type_has_its_status_code() {
    for (t, code) in [
        (ErrorType::BadData, 400),
        (ErrorType::Execution, 422),
        (ErrorType::Timeout, 503),
        (ErrorType::Internal, 500),
    ] {
        let prom = FakePrometheus::answering(Reply::error(t, "no"));
        let (got, body) = get(&format!("{}/api/v1/query?query=up", prom.url()));
        assert_eq!(got, code);
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap(),
            json!({"status": "error", "errorType": t.name(), "error": "no"})
        );
    }
}

#[test]
fn a_chunked_form_body_is_read() {
    let prom = FakePrometheus::builder()
        .answer(|r| Reply::scalar(r.query().len() as f64))
        .start();
    let addr = prom.url().trim_start_matches("http://").to_string();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(
        b"POST /api/v1/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n\
          Transfer-Encoding: chunked\r\n\r\n6\r\nquery=\r\n8\r\nsum%28up\r\n4\r\n%29+\r\n0\r\n\r\n",
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert_eq!(prom.queries(), ["sum(up) "]);
}

#[test]
fn credentials_are_checked_and_a_request_without_them_is_401() {
    let prom = FakePrometheus::builder().basic_auth("imex", "pw").start();
    let url = format!("{}/api/v1/query?query=up", prom.url());
    match ureq::get(&url).call() {
        Err(ureq::Error::Status(401, r)) => {
            assert_eq!(r.status_text(), "Unauthorized");
            assert_eq!(r.header("WWW-Authenticate"), Some("Basic"));
        }
        other => panic!("{other:?}"),
    }
    // imex:pw
    let ok = ureq::get(&url)
        .set("Authorization", "Basic aW1leDpwdw==")
        .call();
    assert_eq!(ok.unwrap().status(), 200);
    let prom = FakePrometheus::builder().bearer_token("t0k").start();
    let url = format!("{}/api/v1/query?query=up", prom.url());
    assert!(ureq::get(&url)
        .set("Authorization", "Bearer nope")
        .call()
        .is_err());
    assert!(ureq::get(&url)
        .set("Authorization", "Bearer t0k")
        .call()
        .is_ok());
}

#[test]
fn tls_is_served_with_a_certificate_the_test_ca_signed() {
    let ca = TestCa::new();
    let prom = FakePrometheus::builder().tls(&ca).start();
    assert!(prom.url().starts_with("https://127.0.0.1:"));
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(ca.pem().as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let agent = ureq::AgentBuilder::new()
        .tls_config(std::sync::Arc::new(config))
        .build();
    let r = agent
        .get(&format!("{}/api/v1/query?query=up", prom.url()))
        .call()
        .unwrap();
    assert_eq!(r.status(), 200);
    // Another CA, even of the same name, did not sign it.
    let other = FakePrometheus::builder().tls(&TestCa::named("x")).start();
    assert!(agent
        .get(&format!("{}/api/v1/query?query=up", other.url()))
        .call()
        .is_err());
    assert!(other.requests().is_empty(), "no request crossed");
}

#[test]
fn faults_slow_refused_and_garbage() {
    let prom = FakePrometheus::builder()
        .delay(Duration::from_secs(5))
        .start();
    let started = Instant::now();
    let e = ureq::get(&format!("{}/api/v1/query?query=up", prom.url()))
        .timeout(Duration::from_millis(200))
        .call()
        .unwrap_err();
    assert!(e.to_string().contains("timed out"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(3));
    let e = ureq::get(&format!("{}/api/v1/query?query=up", refused_url("http")))
        .call()
        .unwrap_err();
    assert!(
        e.to_string().contains("refused") || e.to_string().contains("Connection"),
        "{e}"
    );
    let prom = FakePrometheus::answering(Reply::raw(200, "text/html", "<html>login</html>"));
    let (code, body) = get(&format!("{}/api/v1/query?query=up", prom.url()));
    assert_eq!((code, body.as_str()), (200, "<html>login</html>"));
}

#[test]
fn a_scrape_keeps_what_prometheus_keeps_of_the_exposition() {
    let text = "# HELP up Whether the target is up.\n# TYPE up gauge\n\
                up 1\n\
                slurm_imex_job_node_info{jobid=\"7\",cause=\"a \\\"b\\\" \\\\ c\\nd, {e}\"} 1 1790000000000\n\
                big{x=\"1\"} 1.50e3\n\
                inf{} +Inf\n";
    let samples = fake_prometheus::scrape(text).unwrap();
    let got: Vec<(&str, &str)> = samples
        .iter()
        .map(|s| (s.labels["__name__"].as_str(), s.value.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("up", "1"),
            ("slurm_imex_job_node_info", "1"),
            ("big", "1500"),
            ("inf", "+Inf")
        ]
    );
    assert_eq!(samples[1].labels["cause"], "a \"b\" \\ c\nd, {e}");
    assert_eq!(samples[1].labels["jobid"], "7");
    for bad in [
        "x{a=\"\\t\"} 1",
        "x{a=\"open} 1",
        "x{a=\"1\"}",
        "{a=\"1\"} 1",
        "x one",
    ] {
        assert!(fake_prometheus::scrape(bad).is_err(), "{bad}");
    }
}
