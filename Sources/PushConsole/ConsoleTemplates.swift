/// The console's pages as Mustache templates (swift-mustache; `{{x}}` is HTML-escaped, and nothing
/// here uses the unescaped forms). Every page extends `layout`, which has the navigation, the operator's
/// name, the logout form and the error and notice boxes. Kept in the source so the binary carries them
/// (no resource files to ship beside it).
enum ConsoleTemplates {
    static let all: [String: String] = [
        "layout": layout, "login": login, "compose": compose, "requests": requests, "request": request, "dead": dead, "status": status,
        "tokens": tokens, "forbidden": forbidden,
    ]

    static let layout = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{title}} · push console</title>
        <link rel="stylesheet" href="/static/console.css">
        <script src="/static/console.js" defer></script>
        </head>
        <body>
        <header>
        <strong class="brand">push console</strong>
        {{#operator}}
        <nav>
        {{#nav.send}}<a id="nav-compose" href="/compose">Compose</a>{{/nav.send}}
        {{#nav.read}}<a id="nav-requests" href="/requests">Requests</a>{{/nav.read}}
        {{#nav.deadLetters}}<a id="nav-dead" href="/dead">Dead letters</a>{{/nav.deadLetters}}
        {{#nav.read}}<a id="nav-status" href="/status">Status</a>{{/nav.read}}
        {{#nav.tokens}}<a id="nav-tokens" href="/tokens">Tokens</a>{{/nav.tokens}}
        </nav>
        <form id="logout" method="post" action="/logout"><span id="operator">{{operator}}</span>
        <input type="hidden" name="csrf" value="{{csrf}}"><button id="logout-submit" type="submit">Log out</button></form>
        {{/operator}}
        </header>
        <main>
        {{#error}}<div id="error" class="error" role="alert">{{error}}</div>{{/error}}
        {{#notice}}<div id="notice" class="notice" role="status">{{notice}}</div>{{/notice}}
        {{$content}}{{/content}}
        </main>
        </body>
        </html>
        """

    static let login = """
        {{<layout}}{{$content}}
        <h1>Log in</h1>
        <form id="login" method="post" action="/login" class="narrow">
        <label>Name <input name="name" autocomplete="username" required value="{{name}}"></label>
        <label>Password <input name="password" type="password" autocomplete="current-password" required></label>
        <button id="login-submit" type="submit">Log in</button>
        </form>
        {{/content}}{{/layout}}
        """

    static let compose = """
        {{<layout}}{{$content}}
        <h1>Compose a push</h1>
        <form id="compose" method="post" action="/compose">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <fieldset><legend>Who</legend>
        <label>App <select name="app">{{#apps}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/apps}}</select></label>
        <label>Target <select name="target_kind">{{#targetKinds}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/targetKinds}}</select></label>
        <label>Tokens, users, topic or channel <input name="target" value="{{form.target}}" placeholder="news"></label>
        <label>Request id <input name="request_id" value="{{form.request_id}}" placeholder="generated when empty"></label>
        </fieldset>
        <fieldset><legend>What</legend>
        <label>Title <input name="title" value="{{form.title}}"></label>
        <label>Body <input name="body" value="{{form.body}}"></label>
        <label>Title loc key <input name="title_loc_key" value="{{form.title_loc_key}}"></label>
        <label>Loc key <input name="loc_key" value="{{form.loc_key}}"></label>
        <label>Loc args <input name="loc_args" value="{{form.loc_args}}" placeholder="comma-separated"></label>
        <label>Badge <input name="badge" value="{{form.badge}}" inputmode="numeric"></label>
        <label>Sound <input name="sound" value="{{form.sound}}"></label>
        <label class="wide">Or the raw JSON payload (wins when not empty)
        <textarea name="payload_json" rows="5" spellcheck="false">{{form.payload_json}}</textarea></label>
        </fieldset>
        <fieldset><legend>How</legend>
        <label>Localize <select name="localize">{{#localizeModes}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/localizeModes}}</select></label>
        <label>Push type <select name="push_type">{{#pushTypes}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/pushTypes}}</select></label>
        <label>Priority <select name="priority">{{#priorities}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/priorities}}</select></label>
        <label>Collapse id <input name="collapse_id" value="{{form.collapse_id}}"></label>
        <label>Expiration <input name="expiration" value="{{form.expiration}}" placeholder="unix seconds; 0 = try once"></label>
        </fieldset>
        <button id="preview-submit" type="submit" name="action" value="preview">Preview</button>
        </form>
        {{#preview}}
        <section id="preview">
        <h2>Preview</h2>
        <p>Request <code>{{id}}</code> for <code>{{app}}</code> reaches <strong id="preview-targets">{{targets}}</strong> {{targetsNote}}</p>
        <table id="preview-locales"><thead><tr><th>Locale</th><th>Payload</th></tr></thead><tbody>
        {{#locales}}<tr class="locale" data-locale="{{locale}}"><td>{{locale}}</td><td><pre class="payload">{{payload}}</pre></td></tr>{{/locales}}
        </tbody></table>
        <form id="send" method="post" action="/compose">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="request_json" value="{{requestJSON}}">
        <button id="send-submit" type="submit" name="action" value="send">{{sendLabel}}</button>
        </form>
        </section>
        {{/preview}}
        {{/content}}{{/layout}}
        """

    static let requests = """
        {{<layout}}{{$content}}
        <h1>Recent requests</h1>
        <table id="requests" data-refresh="2">
        <thead><tr><th>Request</th><th>App</th><th>State</th><th>Targeted</th><th>Delivered</th><th>Failed</th><th>Started</th></tr></thead>
        <tbody>
        {{#reports}}<tr class="request" data-request-id="{{id}}" data-app="{{app}}" data-state="{{state}}">
        <td><a href="{{href}}">{{id}}</a></td><td>{{app}}</td><td class="state state-{{state}}">{{state}}</td><td>{{targeted}}</td>
        <td>{{delivered}}</td><td>{{failedTotal}}</td><td>{{started}}</td></tr>{{/reports}}
        {{^reports}}<tr><td colspan="7">No requests yet.</td></tr>{{/reports}}
        </tbody></table>
        {{/content}}{{/layout}}
        """

    static let request = """
        {{<layout}}{{$content}}
        <h1>Request <code>{{report.id}}</code></h1>
        <p>App <code>{{report.app}}</code></p>
        <section id="report" data-state="{{report.state}}" data-api="{{api}}">
        <p class="big">State: <span id="state" class="state state-{{report.state}}">{{report.state}}</span>
        {{#report.deadReason}}<span id="dead-reason">{{report.deadReason}}</span>{{/report.deadReason}}</p>
        <table class="counts">
        {{#counts}}<tr><th>{{label}}</th><td id="count-{{name}}">{{value}}</td><td class="hint">{{hint}}</td></tr>{{/counts}}
        </table>
        <h2>Failed by reason</h2>
        <table id="failures"><tbody>
        {{#failures}}<tr data-reason="{{reason}}"><th>{{reason}}</th><td>{{count}}</td></tr>{{/failures}}
        </tbody></table>
        <p>First delivery: <span id="first-delivery">{{firstDelivery}}</span> · Last delivery: <span id="last-delivery">{{lastDelivery}}</span></p>
        </section>
        {{/content}}{{/layout}}
        """

    static let dead = """
        {{<layout}}{{$content}}
        <h1>Dead letters</h1>
        <p>The first {{limit}} of <code>push.dead</code>, oldest first. Replay sends a letter back to the queue named, and removes it once the broker confirmed the copy.</p>
        <table id="dead">
        <thead><tr><th>Reason</th><th>From</th><th>Body</th><th>Replay to</th></tr></thead>
        <tbody>
        {{#letters}}<tr class="dead-letter" data-key="{{key}}">
        <td class="reason">{{reason}}</td><td class="source">{{source}}</td><td class="body"><pre>{{body}}</pre></td>
        <td><form class="replay" method="post" action="/dead/replay"><input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="key" value="{{key}}">
        <select name="queue">{{#queues}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/queues}}</select>
        <button class="replay-submit" type="submit">Replay</button></form></td></tr>{{/letters}}
        {{^letters}}<tr><td colspan="4">push.dead is empty.</td></tr>{{/letters}}
        </tbody></table>
        {{/content}}{{/layout}}
        """

    static let status = """
        {{<layout}}{{$content}}
        <h1>Status</h1>
        <h2>Queues</h2>
        <table id="queues">
        <thead><tr><th>Queue</th><th>Ready</th><th>Consumers</th></tr></thead>
        <tbody>
        {{#queues}}<tr data-queue="{{name}}"{{#warn}} class="warn"{{/warn}}><td>{{name}}</td><td>{{ready}}</td><td>{{consumers}}</td></tr>{{/queues}}
        </tbody></table>
        <h2>Apps</h2>
        <table id="apps">
        <thead><tr><th>App</th><th>Environment</th><th>Credentials</th><th>Expires in</th><th>Paused</th><th>Problems</th></tr></thead>
        <tbody>
        {{#apps}}<tr data-app="{{app}}"{{#warn}} class="warn"{{/warn}}><td>{{app}}</td><td>{{environment}}</td><td>{{auth}}</td><td>{{expires}}</td><td>{{paused}}</td><td>{{problems}}</td></tr>{{/apps}}
        </tbody></table>
        {{/content}}{{/layout}}
        """

    /// A refused scope: the layout's error box says which scope for which app.
    static let forbidden = """
        {{<layout}}{{$content}}
        <h1>Not allowed</h1>
        <p id="forbidden">Ask an admin to grant the scope in the console's operators file.</p>
        {{/content}}{{/layout}}
        """

    static let tokens = """
        {{<layout}}{{$content}}
        <h1>Token lookup</h1>
        <form id="token-lookup" method="get" action="/tokens">
        <label>App <select name="app">{{#apps}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/apps}}</select></label>
        <label>Token <input name="token" value="{{token}}" size="70"></label>
        <button id="lookup-submit" type="submit">Look up</button>
        </form>
        {{#looked}}
        {{#record}}
        <pre id="token-record">{{record}}</pre>
        <form id="token-delete" method="post" action="/tokens/delete">
        <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="app" value="{{app}}"><input type="hidden" name="token" value="{{token}}">
        <button id="delete-submit" type="submit">Remove this device</button>
        </form>
        {{/record}}
        {{^record}}<p id="token-not-found">No device with this token is registered for {{app}}.</p>{{/record}}
        {{/looked}}
        {{/content}}{{/layout}}
        """

    /// The stylesheet (`/static/console.css`).
    static let css = """
        body{font:15px/1.4 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#f7f7f8}
        header{display:flex;gap:1.5em;align-items:center;padding:.6em 1.2em;background:#1d1d1f;color:#fff}
        header a{color:#fff;margin-right:1em;text-decoration:none}header a:hover{text-decoration:underline}
        header form{margin-left:auto}header button{margin-left:.8em}
        main{padding:1em 1.5em;max-width:1200px}
        fieldset{border:1px solid #ccc;margin:0 0 1em;display:flex;flex-wrap:wrap;gap:.6em 1.2em}
        label{display:flex;flex-direction:column;font-size:13px;color:#555}label.wide{flex-basis:100%}
        input,select,textarea{font:inherit;padding:.25em .4em}textarea{font-family:ui-monospace,monospace}
        .narrow{display:flex;flex-direction:column;gap:.6em;max-width:320px}
        button{font:inherit;padding:.35em 1em;cursor:pointer}
        table{border-collapse:collapse;margin:.5em 0 1.5em;background:#fff}
        th,td{border:1px solid #ddd;padding:.3em .6em;text-align:left;vertical-align:top}
        pre{margin:0;white-space:pre-wrap;word-break:break-all;font-size:12px;max-width:640px}
        .error{background:#fde2e1;border:1px solid #e0a3a0;padding:.6em;margin-bottom:1em}
        .notice{background:#e3f4e1;border:1px solid #a3cf9f;padding:.6em;margin-bottom:1em}
        .state-done{color:#1a7f37}.state-dead{color:#b42318}.state-sending,.state-rendering,.state-queued{color:#9a6700}
        .big{font-size:18px}.hint{color:#777;font-size:13px}tr.warn td{background:#fff4e5}
        """

    /// The only script (`/static/console.js`): a report page polls its JSON until the request is done
    /// or dead; the requests list reloads itself every few seconds. The pages work without it.
    static let javascript = """
        "use strict";
        (function () {
          const report = document.getElementById("report");
          if (report) {
            const fields = ["targeted", "skipped", "batches", "sent", "delivered", "failed_total", "retried", "deferred", "removed"];
            const poll = async function () {
              const state = report.dataset.state;
              if (state === "done" || state === "dead") { return; }
              try {
                const response = await fetch(report.dataset.api, { credentials: "same-origin", headers: { "Accept": "application/json" } });
                if (response.ok) {
                  const data = await response.json();
                  for (const name of fields) {
                    const cell = document.getElementById("count-" + (name === "failed_total" ? "failed" : name));
                    if (cell) { cell.textContent = String(data[name]); }
                  }
                  const table = document.querySelector("#failures tbody");
                  if (table) {
                    table.replaceChildren();
                    for (const reason of Object.keys(data.failed).sort()) {
                      const row = document.createElement("tr");
                      row.dataset.reason = reason;
                      const th = document.createElement("th");
                      th.textContent = reason;
                      const td = document.createElement("td");
                      td.textContent = String(data.failed[reason]);
                      row.append(th, td);
                      table.append(row);
                    }
                  }
                  const time = function (ms) { return ms === null ? "–" : new Date(ms).toISOString(); };
                  document.getElementById("first-delivery").textContent = time(data.first_delivery_at);
                  document.getElementById("last-delivery").textContent = time(data.last_delivery_at);
                  const label = document.getElementById("state");
                  label.textContent = data.state;
                  label.className = "state state-" + data.state;
                  report.dataset.state = data.state;
                }
              } catch (error) { /* the next poll tries again */ }
              setTimeout(poll, 1000);
            };
            setTimeout(poll, 1000);
          }
          const list = document.querySelector("table[data-refresh]");
          if (list) {
            setTimeout(function () { window.location.reload(); }, 1000 * Number(list.dataset.refresh));
          }
        })();
        """
}
