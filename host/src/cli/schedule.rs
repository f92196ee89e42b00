//! `taskhost schedule ...`: periodic tasks (see [`taskhost::schedule`]).

use std::fmt::Write;

use anyhow::Result;
use clap::Subcommand;
use taskhost::schedule::{Missed, NewSchedule, Slots};
use taskhost::App;

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Create a schedule: a task for HANDLER at every slot of a cron expression.
    Add {
        /// The schedule's name (unique).
        name: String,
        /// Cron expression: five fields (minute hour day month weekday), six with seconds first,
        /// or @hourly, @daily, ...
        #[arg(long)]
        cron: String,
        /// The handler of the tasks it queues.
        #[arg(long)]
        handler: String,
        /// The tasks' data, a JSON document; @FILE reads it from a file, - from standard input.
        #[arg(long, default_value = "{}")]
        data: String,
        /// The tasks' queue.
        #[arg(long, default_value = taskhost::model::DEFAULT_QUEUE)]
        queue: String,
        /// The tasks' priority (lower runs first).
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        priority: i32,
        /// The time zone the expression is read in (IANA, e.g. Europe/Paris).
        #[arg(long, default_value = "UTC")]
        time_zone: String,
        /// Slots missed while no overseer ran: queue one task for the latest (once) or none (skip).
        #[arg(long, default_value = "once", value_parser = ["once", "skip"])]
        missed: String,
    },
    /// List the schedules with their next slot.
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Delete a schedule (the tasks it queued stay).
    Remove {
        /// The schedule's name.
        name: String,
    },
    /// Stop a schedule queueing tasks until it is resumed.
    Pause {
        /// The schedule's name.
        name: String,
    },
    /// Resume a paused schedule.
    Resume {
        /// The schedule's name.
        name: String,
    },
    /// Queue one of its tasks now, besides its slots.
    Trigger {
        /// The schedule's name.
        name: String,
    },
}

pub async fn run(app: &App, command: ScheduleCommand) -> Result<()> {
    let client = &app.client;
    let found = |name: &str, ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(taskhost::Error::ScheduleNotFound(name.to_string()))
        }
    };
    match command {
        ScheduleCommand::Add { name, cron, handler, data, queue, priority, time_zone, missed } => {
            let data = super::read_data(&data)?;
            let missed: Missed = missed.parse()?;
            let s = NewSchedule { name, cron, time_zone, handler, data, queue, priority, missed };
            client.add_schedule(&s).await?;
            let next = Slots::new(&s.cron, &s.time_zone)?.next(client.now());
            let next = next.map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string()).unwrap_or_else(|| "never".into());
            println!("schedule {} added: next slot {next}", s.name);
        }
        ScheduleCommand::List { json } => {
            let schedules = client.schedules().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&schedules)?);
                return Ok(());
            }
            let mut out = String::new();
            let _ = writeln!(
                out,
                "{:<20} {:<16} {:<14} {:<14} {:<10} {:<20} {:<8}  PAUSED",
                "NAME", "CRON", "TIME ZONE", "HANDLER", "QUEUE", "NEXT (UTC)", "FROM"
            );
            let now = client.now();
            for schedule in schedules {
                let s = &schedule.spec;
                let next = Slots::new(&s.cron, &s.time_zone).ok().and_then(|slots| slots.next(now));
                let next = next.map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string()).unwrap_or_else(|| "-".into());
                let paused =
                    schedule.paused_on.map(|t| format!("since {}", t.format("%Y-%m-%d %H:%M:%S"))).unwrap_or_default();
                // Declared in the configuration file, or added by hand.
                let from = if schedule.declared { "config" } else { "added" };
                let _ = writeln!(
                    out,
                    "{:<20} {:<16} {:<14} {:<14} {:<10} {:<20} {:<8}  {paused}",
                    s.name, s.cron, s.time_zone, s.handler, s.queue, next, from
                );
            }
            print!("{out}");
        }
        ScheduleCommand::Remove { name } => {
            found(&name, client.remove_schedule(&name).await?)?;
            println!("schedule {name} removed");
        }
        ScheduleCommand::Pause { name } => {
            found(&name, client.pause_schedule(&name, true).await?)?;
            println!("schedule {name} paused");
        }
        ScheduleCommand::Resume { name } => {
            found(&name, client.pause_schedule(&name, false).await?)?;
            println!("schedule {name} resumed");
        }
        ScheduleCommand::Trigger { name } => {
            let id = client.trigger_schedule(&name).await?;
            println!("{id}");
        }
    }
    Ok(())
}
