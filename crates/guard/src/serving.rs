//! What the listeners need of the guard in force, and no more: the proxy
//! in force (a `watch`, swapped by a reload), the drain and stop flags,
//! and the task set their accept loops and drains run in. `live` builds
//! it and hands it to `listen_set` and `listener`, which never see `Live`
//! itself: `live` is imported by `admin` and the crate root alone, and
//! imports neither back.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::proxy::Proxy;

/// A listener's view of the guard.
#[derive(Clone)]
pub(crate) struct Serving {
    proxy: watch::Receiver<Arc<Proxy>>,
    draining: watch::Receiver<bool>,
    stopped: watch::Receiver<bool>,
    tasks: Arc<Mutex<JoinSet<()>>>,
}

impl Serving {
    /// The view of a guard whose proxy is sent on `proxy`'s sender.
    pub(crate) fn new(
        proxy: watch::Receiver<Arc<Proxy>>,
        draining: watch::Receiver<bool>,
        stopped: watch::Receiver<bool>,
        tasks: Arc<Mutex<JoinSet<()>>>,
    ) -> Serving {
        Serving {
            proxy,
            draining,
            stopped,
            tasks,
        }
    }

    /// The proxy in force now. A request takes it when it starts and
    /// finishes on it, whatever a reload does meanwhile.
    pub(crate) fn proxy(&self) -> Arc<Proxy> {
        self.proxy.borrow().clone()
    }

    /// Turns true once, when the guard drains.
    pub(crate) fn draining(&self) -> watch::Receiver<bool> {
        self.draining.clone()
    }

    /// Turns true when the guard stops.
    pub(crate) fn stopped(&self) -> watch::Receiver<bool> {
        self.stopped.clone()
    }

    /// Runs `task` until the guard stops (it must watch
    /// [`Serving::stopped`]); the guard's `join` waits for it. Finished
    /// tasks are reaped here, so reloads do not pile them up.
    pub(crate) fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        while tasks.try_join_next().is_some() {}
        tasks.spawn(task);
    }
}
