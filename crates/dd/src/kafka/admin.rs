//! Making the cluster's topics what the configuration says: missing topics created with their
//! partitions and `retention.ms`, topics with fewer partitions than configured given more (Kafka
//! cannot take partitions away: a topic with more keeps them, and the report says so), and a
//! retention that differs set. Run at start by every instance; two instances creating one topic
//! at once is fine (the second finds it there).

use std::collections::HashMap;
use std::time::Duration;

use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, ConfigSource, NewPartitions, NewTopic,
    ResourceSpecifier, TopicReplication,
};
use rdkafka::types::RDKafkaErrorCode;

use super::config::check_topic_name;
use super::{
    ask_cluster, not_ready, readiness, validated, KafkaConfig, KafkaError, LogContext, TopicSpec,
};

/// What [`ensure_topics`] changed, and what it could not.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct EnsureReport {
    /// Topics created.
    pub created: Vec<String>,
    /// Topics given more partitions: (name, partitions before, after).
    pub grown: Vec<(String, u32, u32)>,
    /// Topics whose `retention.ms` was set to the configured value.
    pub retention_set: Vec<String>,
    /// Topics with more partitions than configured, left so: (name, partitions, configured).
    pub more_partitions: Vec<(String, u32, u32)>,
}

/// Makes `topics` exist on the cluster of `cfg` as specified (see the module doc).
pub async fn ensure_topics(
    cfg: &KafkaConfig,
    topics: &[TopicSpec],
) -> Result<EnsureReport, KafkaError> {
    validated(cfg)?;
    for t in topics {
        check_topic_name(&t.name).map_err(KafkaError::Config)?;
        if t.partitions == 0 || t.replication_factor == 0 || t.retention_ms == 0 {
            return Err(KafkaError::Topic {
                topic: t.name.clone(),
                reason: "partitions, replication factor and retention must be at least 1".into(),
            });
        }
    }
    let mut c = cfg.client_config();
    cfg.overrides(&mut c);
    let admin: AdminClient<LogContext> = c
        .create_with_context(LogContext::new("admin"))
        .map_err(KafkaError::client("creating the Kafka admin client"))?;
    let admin = std::sync::Arc::new(admin);
    let a = admin.clone();
    let existing: HashMap<String, u32> = ask_cluster(cfg, move |t| {
        let md = a.inner().fetch_metadata(None, t)?;
        Ok(md
            .topics()
            .iter()
            .map(|t| (t.name().to_string(), t.partitions().len() as u32))
            .collect())
    })
    .await?;
    let timeout = Duration::from_millis(cfg.request_timeout_ms);
    let opts = AdminOptions::new().request_timeout(Some(timeout)).operation_timeout(Some(timeout));
    let mut report = EnsureReport::default();

    let retention: Vec<String> = topics.iter().map(|t| t.retention_ms.to_string()).collect();
    let missing: Vec<(usize, &TopicSpec)> =
        topics.iter().enumerate().filter(|(_, t)| !existing.contains_key(&t.name)).collect();
    if !missing.is_empty() {
        let new: Vec<NewTopic<'_>> = missing
            .iter()
            .map(|(i, t)| {
                NewTopic::new(
                    &t.name,
                    t.partitions as i32,
                    TopicReplication::Fixed(t.replication_factor as i32),
                )
                .set("retention.ms", &retention[*i])
            })
            .collect();
        let results = admin
            .create_topics(&new, &opts)
            .await
            .map_err(KafkaError::client("creating topics"))?;
        for r in results {
            match r {
                Ok(name) => report.created.push(name),
                // Another instance made it meanwhile: it is checked like any existing one below
                // at the next start; its settings are the same configuration's.
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((topic, code)) => {
                    return Err(KafkaError::Topic { topic, reason: format!("not created: {code}") })
                }
            }
        }
    }

    if !report.created.is_empty() {
        let a = admin.clone();
        let late = not_ready(cfg, &report.created, move |t| {
            a.inner().fetch_metadata(None, t).map(|md| readiness(&md))
        })
        .await?;
        if let Some(topic) = late.into_iter().next() {
            return Err(KafkaError::Topic {
                topic,
                reason: format!(
                    "created, but without a leader for every partition after {} ms",
                    cfg.request_timeout_ms
                ),
            });
        }
    }

    let present: Vec<&TopicSpec> =
        topics.iter().filter(|t| existing.contains_key(&t.name)).collect();
    let mut grow = Vec::new();
    for t in &present {
        let have = existing[&t.name];
        if have < t.partitions {
            grow.push(NewPartitions::new(&t.name, t.partitions as usize));
            report.grown.push((t.name.clone(), have, t.partitions));
        } else if have > t.partitions {
            tracing::warn!(
                topic = %t.name,
                "the topic has {have} partitions, {} configured: Kafka cannot remove partitions, they stay",
                t.partitions
            );
            report.more_partitions.push((t.name.clone(), have, t.partitions));
        }
    }
    if !grow.is_empty() {
        for r in admin
            .create_partitions(&grow, &opts)
            .await
            .map_err(KafkaError::client("adding partitions"))?
        {
            if let Err((topic, code)) = r {
                return Err(KafkaError::Topic {
                    topic,
                    reason: format!("partitions not added: {code}"),
                });
            }
        }
    }

    if !present.is_empty() {
        let specs: Vec<ResourceSpecifier<'_>> =
            present.iter().map(|t| ResourceSpecifier::Topic(&t.name)).collect();
        let described = admin
            .describe_configs(&specs, &opts)
            .await
            .map_err(KafkaError::client("reading topic configurations"))?;
        for (t, d) in present.iter().zip(described) {
            let resource = d.map_err(|code| KafkaError::Topic {
                topic: t.name.clone(),
                reason: format!("configuration not readable: {code}"),
            })?;
            let want = t.retention_ms.to_string();
            let now = resource.get("retention.ms").and_then(|e| e.value.as_deref());
            if now == Some(want.as_str()) {
                continue;
            }
            // AlterConfigs replaces a topic's whole dynamic configuration: keep what was set on
            // the topic besides retention.ms.
            let mut alter = AlterConfig::new(ResourceSpecifier::Topic(&t.name));
            for e in &resource.entries {
                if e.source == ConfigSource::DynamicTopic
                    && e.name != "retention.ms"
                    && !e.is_sensitive
                {
                    if let Some(v) = &e.value {
                        alter = alter.set(&e.name, v);
                    }
                }
            }
            alter = alter.set("retention.ms", &want);
            for r in admin
                .alter_configs([&alter], &opts)
                .await
                .map_err(KafkaError::client("setting retention.ms"))?
            {
                if let Err((_, code)) = r {
                    return Err(KafkaError::Topic {
                        topic: t.name.clone(),
                        reason: format!("retention.ms not set: {code}"),
                    });
                }
            }
            report.retention_set.push(t.name.clone());
        }
    }
    Ok(report)
}
