//! What the fleet commands share: the operations endpoints and the outage budgets.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use covmerge_queue::amqp::{AmqpOptions, AmqpQueue};
use covmerge_queue::DEFAULT_DELIVERY_LIMIT;
use covmerge_storage::Store;
use covmerge_telemetry::Health;

use crate::cli::{ListenArgs, OutageArgs};

impl ListenArgs {
    /// Starts the endpoints if asked; the returned health is not ready until a check
    /// is set.
    pub(crate) async fn start(&self) -> Result<Arc<Health>> {
        let health = Health::new();
        if let Some(addr) = &self.listen {
            let bound = covmerge_telemetry::serve(addr, health.clone()).await?;
            // Tests and scripts bind port 0 and read the port from here.
            crate::log::err_line(&format!("listening on {bound}"));
        }
        Ok(health)
    }
}

impl OutageArgs {
    pub(crate) async fn queue(&self, url: &str, name: &str) -> Result<AmqpQueue> {
        let opts = AmqpOptions {
            connect_timeout: Duration::from_secs(self.broker_outage_budget),
            connection_name: name.to_string(),
            ..AmqpOptions::new(DEFAULT_DELIVERY_LIMIT)
        };
        Ok(AmqpQueue::connect_with(url, opts).await?)
    }

    pub(crate) fn store(&self, url: &str) -> Result<Store> {
        Ok(Store::open(url)?.with_retry_budget(Duration::from_secs(self.store_outage_budget)))
    }
}
