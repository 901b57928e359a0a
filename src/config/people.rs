//! Do the users and `@groups` a config names (`admins`, each share's `members` and
//! `fairShare.weights`) exist on this machine? A name that does not is allowed (the account may come later) but is
//! probably a typo, so `check` and `serve` warn about it.

use crate::model::ValidConfig;

/// One warning per name in `admins`, `members` or `fairShare.weights` that this machine's
/// user database does not know.
pub fn unknown_people(cfg: &ValidConfig) -> Vec<String> {
    unknown_with(cfg, |name, group| {
        if group {
            nix::unistd::Group::from_name(name).is_ok_and(|g| g.is_some())
        } else {
            nix::unistd::User::from_name(name).is_ok_and(|u| u.is_some())
        }
    })
}

/// `unknown_people`, asking `exists(name, is_group)`.
fn unknown_with(cfg: &ValidConfig, exists: impl Fn(&str, bool) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut look = |field: String, names: &[String]| {
        for n in names {
            let (name, group) = match n.strip_prefix('@') {
                Some(g) => (g, true),
                None => (n.as_str(), false),
            };
            if !exists(name, group) {
                out.push(format!(
                    "{field}: there is no {} named `{name}` on this machine",
                    if group { "group" } else { "user" }
                ));
            }
        }
    };
    if let Some(a) = &cfg.env.admins {
        look("admins".to_string(), a);
    }
    for s in &cfg.shares {
        if let Some(m) = &s.members {
            look(format!("share `{}`: members", s.quota_share_name), m);
        }
        // A weight for a user who does not exist weighs nobody (a typo leaves the real
        // user at weight 1).
        if let Some(fs) = &s.fair_share {
            let users: Vec<String> = fs.weights.keys().cloned().collect();
            look(
                format!("share `{}`: fairShare.weights", s.quota_share_name),
                &users,
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_users_and_groups_the_machine_does_not_know() {
        let text = "kind: ServiceEnvironment\nname: e\nadmins: [ana, \"@ops\"]\n\
            capacityLimits: [{capacityUnit: gpu, maxCapacity: 2, devices: {fake: 2}}]\n---\n\
            kind: QuotaShare\nquotaShareName: s\nmembers: [bob, \"@vision\"]\n\
            capacityLimits: [{capacityUnit: gpu, maxCapacity: 2}]\n\
            resourceSharingConfiguration: {strategy: LEND}\n\
            fairShare: {weights: {ana: 2, alcie: 3}}\n";
        let docs = crate::config::parse_documents(text, None).expect("parse");
        let cfg = crate::config::validate(docs).expect("valid");
        let known = ["ana", "vision"];
        let w = unknown_with(&cfg, |n, _| known.contains(&n));
        assert_eq!(
            w,
            vec![
                "admins: there is no group named `ops` on this machine".to_string(),
                "share `s`: members: there is no user named `bob` on this machine".to_string(),
                "share `s`: fairShare.weights: there is no user named `alcie` on this machine"
                    .to_string(),
            ]
        );
        // root exists everywhere; a made-up name nowhere.
        assert!(unknown_with(&cfg, |n, g| !g && n == "root").len() == 6);
    }
}
