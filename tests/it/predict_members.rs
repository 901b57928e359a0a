//! `submit --predict` answers as the submit would (issue 46): a share the user may not
//! submit to is refused with the same words and exit code 3, for real users of a root
//! scheduler (as in `multi_user`); a member and an admin get the prediction.

use crate::multi_user::{Lab, Users, skip_reason, text};

fn config(u: &Users) -> String {
    format!(
        "kind: ServiceEnvironment\nname: lab\ncapacityLimits:\n  - {{capacityUnit: gpu, maxCapacity: 2, devices: {{fake: 2}}}}\n\
         admins: [\"@{group}\"]\n---\n\
         kind: QuotaShare\nquotaShareName: open\ncapacityLimits: [{{capacityUnit: gpu, maxCapacity: 1}}]\n\
         resourceSharingConfiguration: {{strategy: LEND_AND_BORROW}}\n---\n\
         kind: QuotaShare\nquotaShareName: private\ncapacityLimits: [{{capacityUnit: gpu, maxCapacity: 1}}]\n\
         resourceSharingConfiguration: {{strategy: LEND}}\nmembers: [{alice}]\n",
        group = u.group(),
        alice = u.name("alice"),
    )
}

#[test]
fn a_prediction_for_a_share_one_may_not_use_is_refused_as_the_submit_is() {
    if let Some(why) = skip_reason() {
        eprintln!("skipping {}: {why} (needs real users)", module_path!());
        return;
    }
    let u = Users::create(&["alice", "bob", "carol"], &["carol"]);
    let (alice, bob, carol) = (u.name("alice"), u.name("bob"), u.name("carol"));
    let mut lab = Lab::new();
    lab.write_config(&config(&u));
    lab.serve().expect("serve");
    let predict = |who: &str, share: &str, json: bool| {
        let mut args = vec!["submit", "--predict", "--share", share];
        if json {
            args.push("--json");
        }
        args.extend(["--", "true"]);
        lab.cli_as(Some(who), &args)
    };
    let submit = lab.submit_as(&bob, "private", "x", "true");
    let refused = predict(&bob, "private", false);
    assert_eq!(refused.status.code(), Some(3), "{}", text(&refused.stderr));
    assert_eq!(refused.status.code(), submit.status.code());
    let rule = format!("{bob} may not submit to private: members are {alice}");
    assert_eq!(
        text(&refused.stderr).trim(),
        format!("shareq submit --predict: {rule}")
    );
    assert!(
        text(&submit.stderr).contains(&rule),
        "{}",
        text(&submit.stderr)
    );
    assert!(
        text(&refused.stdout).is_empty(),
        "{}",
        text(&refused.stdout)
    );
    let json = predict(&bob, "private", true);
    assert_eq!(json.status.code(), Some(3), "--json too");
    // A member, an admin, and anyone on an open share get the prediction.
    for (who, share) in [(&alice, "private"), (&carol, "private"), (&bob, "open")] {
        let out = predict(who, share, true);
        assert!(
            out.status.success(),
            "{who} on {share}: {}",
            text(&out.stderr)
        );
        let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(p["verdict"], "START_NOW", "{who} on {share}: {p}");
    }
    // Nothing was queued by any of it.
    let all = lab.cli_as(None, &["jobs", "--all", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&all.stdout).unwrap();
    for list in ["queue", "running", "finished"] {
        assert_eq!(v[list].as_array().map(Vec::len), Some(0), "{list}: {v}");
    }
}
