// The web UI journey in a real Chromium (Debian's, through playwright-core).
// tests/web/web_test.go starts the platform with a scripted model and runs
// this script; it exits non-zero with a message on the first failed step.
//
// Environment: BASE_URL (the platform), CONTROL_URL (the test's control
// server: POST /release/<name> lets a held model answer go on), SHOTS (the
// folder for screenshots), MD_FILE (a Markdown file to upload), CHROMIUM.
import { run, fail } from './lib.mjs'

const base = process.env.BASE_URL
const control = process.env.CONTROL_URL
const shots = process.env.SHOTS
const mdFile = process.env.MD_FILE

await run('journey', shots, async ({ page, log, shot, allowErrors }) => {
  const release = (name) => fetch(`${control}/release/${name}`, { method: 'POST' }).then((r) => { if (!r.ok) throw new Error('release ' + r.status) })

  // 1. First run: the superadmin is created on the first-run screen.
  log('first run')
  await page.goto(base + '/')
  await page.waitForURL('**/login**')
  await page.getByRole('heading', { name: 'Create the superadmin' }).waitFor()
  await shot('first-run')
  await page.fill('#uid', 'admin')
  await page.fill('#password', 'admin-password-1')
  await page.getByRole('button', { name: 'Create' }).click()
  await page.waitForURL('**/chat**')

  // 2. Login: a wrong password gets the generic message; then keyboard-only sign-in.
  log('login')
  await page.evaluate(() => localStorage.removeItem('yuxi.token'))
  await page.goto(base + '/login')
  await page.getByRole('heading', { name: 'Sign in' }).waitFor()
  allowErrors(true)
  await page.fill('#uid', 'admin')
  await page.fill('#password', 'wrong-password')
  await page.keyboard.press('Enter')
  await page.getByTestId('login-error').filter({ hasText: 'Wrong account or password.' }).waitFor()
  allowErrors(false)
  await shot('login-failed')
  await page.focus('#uid')
  await page.keyboard.press('Tab')
  await page.keyboard.press('Control+A')
  await page.keyboard.type('admin-password-1')
  await page.keyboard.press('Enter')
  await page.waitForURL('**/chat**')
  await shot('chat-empty')

  // 3. Knowledge base: create, upload a Markdown file, watch it reach indexed.
  log('knowledge base')
  await page.getByRole('link', { name: 'Knowledge' }).click()
  await page.getByTestId('kb-new').click()
  await page.fill('#kb-name', 'Handbook')
  await page.fill('#kb-desc', 'Company handbook')
  await page.getByTestId('kb-create').click()
  await page.waitForURL(/\/knowledge\/[^/]+$/)
  await page.getByTestId('kb-upload').setInputFiles(mdFile)
  await page.locator('[data-testid=kb-files] tr[data-status=indexed]').waitFor({ timeout: 60000 })
  await shot('kb-indexed')

  // 4. Chat: a new thread, an answer streams in (partial text before the end).
  log('chat')
  await page.getByRole('link', { name: 'Chat' }).click()
  await page.getByTestId('new-thread').click()
  await page.waitForURL('**/chat/*')
  await page.getByTestId('composer').fill('Tell me a story')
  await page.getByTestId('composer').press('Enter')
  const live = page.locator('[data-testid=msg-ai][data-live=true]')
  await live.filter({ hasText: 'Once upon a time' }).waitFor()
  if (await page.locator('[data-testid=messages]').getByText('THE END.').count()) fail('the whole answer was there before it was released')
  await page.getByTestId('stop').waitFor()
  await shot('streaming-partial')

  // 5. Reload mid-stream: the answer continues from the run's stream, once.
  log('reload mid-stream')
  await page.reload()
  await live.filter({ hasText: 'Once upon a time' }).waitFor()

  // 6. Queue a second message while the first runs; it shows its position.
  log('queue')
  await page.getByTestId('composer').fill('And a second question')
  await page.getByTestId('send').click()
  await page.getByTestId('queued-item').filter({ hasText: 'position 1' }).waitFor()
  await shot('queued')
  await release('story')
  await page.locator('[data-testid=msg-ai]').filter({ hasText: 'THE END.' }).waitFor()
  await page.locator('[data-testid=msg-ai]').filter({ hasText: 'Second answer.' }).waitFor()
  await page.getByTestId('queued-item').waitFor({ state: 'detached' })
  const text = await page.getByTestId('messages').innerText()
  const count = (s) => text.split(s).length - 1
  if (count('Once upon a time') !== 1 || count('THE END.') !== 1 || count('Second answer.') !== 1) {
    fail(`each answer must appear exactly once, got:\n${text}`)
  }
  await shot('answers-complete')

  // 7. ask_user_question: the form answers the question and the run resumes.
  log('ask_user_question')
  await page.getByTestId('composer').fill('Plan my trip')
  await page.getByTestId('composer').press('Enter')
  const form = page.getByTestId('ask-form')
  await form.waitFor()
  await shot('question')
  await form.getByLabel('Kyoto').check()
  await form.getByRole('button', { name: 'Submit answer' }).click()
  await page.locator('[data-testid=msg-ai]').filter({ hasText: 'You chose kyoto.' }).waitFor()
  await form.waitFor({ state: 'detached' })

  // 8. Cancel a slow run with the stop button.
  log('cancel')
  await page.getByTestId('composer').fill('Think slowly')
  await page.getByTestId('composer').press('Enter')
  await live.filter({ hasText: 'Thinking slowly' }).waitFor()
  await page.getByTestId('stop').click()
  await page.getByTestId('stop').waitFor({ state: 'detached' })
  await page.getByText('Stopped').first().waitFor()
  await shot('cancelled')

  // 9. Tool approval: an agent whose policy confirms mark_for_improvement;
  // the run stops with the pending call, Approve resumes it and the call
  // runs (its result shows in the collapsed tool card); Reject tells the model.
  log('tool approval')
  await page.evaluate(async () => {
    const r = await fetch('/api/agent', { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + localStorage.getItem('yuxi.token') },
      body: JSON.stringify({ name: 'Careful', slug: 'careful', config_json: { context: { tool_policies: { mark_for_improvement: 'confirm' } } } }) })
    if (!r.ok) throw new Error('create agent ' + r.status)
  })
  await page.reload()
  const before = new URL(page.url()).pathname
  await page.getByTestId('agent-pick').selectOption('careful')
  await page.getByTestId('new-thread').click()
  await page.waitForURL((u) => u.pathname !== before)
  await page.getByTestId('composer').fill('Please mark this one')
  await page.getByTestId('composer').press('Enter')
  const appr = page.getByTestId('approval')
  await appr.getByText('mark_for_improvement').waitFor()
  await appr.getByText('Please mark this one').waitFor() // the arguments
  await shot('approval')
  await appr.getByTestId('approve').click()
  await page.locator('[data-testid=msg-ai]').filter({ hasText: 'Marked for review.' }).waitFor()
  await appr.waitFor({ state: 'detached' })
  const card = page.getByTestId('tool-call').filter({ hasText: 'mark_for_improvement' }).first()
  await card.locator('summary').click()
  await card.getByText('Arguments').waitFor()
  await page.getByText(/\d+ tokens/).first().waitFor() // token usage of the run
  await shot('approved')
  await page.getByTestId('composer').fill('Now mark that other')
  await page.getByTestId('composer').press('Enter')
  await appr.waitFor()
  await page.reload() // the pending approval survives a reload
  await appr.getByLabel(/Reason for rejecting/).fill('not needed')
  await appr.getByTestId('reject').click()
  await page.locator('[data-testid=msg-ai]').filter({ hasText: 'Understood, not marked.' }).waitFor()

  // 10. API keys: create shows the secret once and it works; revoke ends it.
  log('api keys')
  const authed = (path, init = {}) => page.evaluate(async ([path, init]) => {
    const r = await fetch(path, { ...init, headers: { 'Content-Type': 'application/json', ...(init.headers ?? {}) } })
    return { status: r.status, body: await r.json().catch(() => null) }
  }, [path, init])
  await page.getByRole('link', { name: 'API keys' }).click()
  await page.getByTestId('key-name').fill('ci-key')
  await page.getByTestId('key-create').click()
  const secret = (await page.getByTestId('key-secret-value').innerText()).trim()
  await page.locator('[data-testid=key-table] tr[data-key=ci-key]').getByText('Active').waitFor()
  await shot('api-keys')
  if ((await authed('/api/chat/threads', { headers: { Authorization: 'Bearer ' + secret } })).status !== 200) fail('the new API key does not authenticate')
  page.once('dialog', (d) => d.accept())
  await page.locator('[data-testid=key-table] tr[data-key=ci-key]').getByRole('button', { name: 'Revoke' }).click()
  await page.locator('[data-testid=key-table] tr[data-key=ci-key]').waitFor({ state: 'detached' }) // the list shows live keys only
  await page.reload()
  if (await page.getByTestId('key-secret').count()) fail('the secret is shown again after a reload')
  allowErrors(true)
  if ((await authed('/api/chat/threads', { headers: { Authorization: 'Bearer ' + secret } })).status !== 401) fail('a revoked key still authenticates')
  allowErrors(false)

  // 11. CLI login: the CLI's code is approved on the verification page; the CLI gets a key.
  log('cli login')
  const cli = (await authed('/api/auth/cli/sessions', { method: 'POST', body: JSON.stringify({ key_name: 'laptop' }) })).body
  await page.goto(`${base}${cli.verification_uri}?user_code=${cli.user_code}`)
  await page.getByTestId('cli-status').filter({ hasText: 'Waiting for approval' }).waitFor()
  await page.getByTestId('cli-session').getByText('laptop').waitFor()
  await shot('cli-authorize')
  await page.getByTestId('cli-approve').click()
  await page.getByTestId('cli-status').filter({ hasText: 'Approved' }).waitFor()
  const got = await authed('/api/auth/cli/sessions/token', { method: 'POST', body: JSON.stringify({ device_code: cli.device_code }) })
  if (got.status !== 200 || !got.body?.secret) fail(`CLI exchange after approval: ${got.status} ${JSON.stringify(got.body)}`)

  // 12. OIDC callback: a bad code lands on a clear failure with a way back.
  log('oidc callback')
  allowErrors(true)
  await page.goto(base + '/auth/oidc/callback?code=not-a-real-code')
  await page.getByTestId('oidc-error').waitFor()
  allowErrors(false)
  if (new URL(page.url()).search) fail('the one-time code stayed in the URL')
  await shot('oidc-failed')
  await page.goto(base + '/chat')

  // 13. Agents: the form generated from configurable_items creates an
  // agent (only changed values stored), edits it, and makes it the default.
  log('agent form')
  await page.getByRole('link', { name: 'Agents' }).click()
  await page.getByTestId('agent-new').click()
  const af = page.getByTestId('agent-form')
  await af.locator('[data-item=system_prompt] textarea').waitFor()
  await af.getByLabel('Name', { exact: true }).fill('Writer')
  await af.getByLabel('Slug (optional)').fill('writer')
  await af.locator('[data-item=system_prompt] textarea').fill('You write short answers.')
  await af.locator('[data-item=max_execution_steps] input').fill('7')
  await af.locator('[data-item=tool_approval_mode] select').selectOption('always_trust')
  await af.locator('[data-item=knowledges]').getByLabel('Handbook').check()
  await shot('agent-form')
  await page.getByTestId('agent-save').click()
  await page.locator('[data-testid=agent-table] tr[data-agent=writer]').waitFor()
  const agentCtx = async () => (await authed('/api/agent/writer', { headers: { Authorization: 'Bearer ' + (await page.evaluate(() => localStorage.getItem('yuxi.token'))) } })).body?.config_json?.context ?? {}
  let ctxNow = await agentCtx()
  if (ctxNow.system_prompt !== 'You write short answers.' || ctxNow.max_execution_steps !== 7 || ctxNow.tool_approval_mode !== 'always_trust' ||
      ctxNow.knowledges?.length !== 1 || 'model' in ctxNow || 'tools' in ctxNow) fail('agent context saved by the form: ' + JSON.stringify(ctxNow))
  await page.locator('[data-testid=agent-table] tr[data-agent=writer]').getByRole('link', { name: 'Edit' }).click()
  await af.getByLabel('Description').fill('Short answers')
  await page.getByTestId('agent-default').check()
  await page.getByTestId('agent-save').click()
  const row = page.locator('[data-testid=agent-table] tr[data-agent=writer]')
  await row.getByText('Short answers').waitFor()
  await row.getByText('Default').waitFor()
  ctxNow = await agentCtx()
  if (ctxNow.max_execution_steps !== 7) fail('the edit lost a stored value: ' + JSON.stringify(ctxNow))
  await shot('agents')
  await page.getByRole('link', { name: 'Chat' }).click()

  // 14. Administration: a department with its admin, a user in it; a model
  // provider added and disabled; a system setting saved.
  log('administration')
  const bearer = async () => ({ headers: { Authorization: 'Bearer ' + (await page.evaluate(() => localStorage.getItem('yuxi.token'))) } })
  await page.getByRole('link', { name: 'Administration' }).click()
  const df = page.getByTestId('dept-form')
  await df.getByLabel('Name', { exact: true }).fill('Sales')
  await df.getByLabel('Department admin account').fill('sales-boss')
  await df.getByLabel('Department admin password').fill('sales-password-1')
  await page.getByTestId('dept-create').click()
  await page.locator('[data-testid=dept-table] tr[data-dept=Sales]').waitFor()
  const uf = page.getByTestId('user-form')
  await uf.getByLabel('Account').fill('alice')
  await uf.getByLabel('Password').fill('alice-password-1')
  await uf.getByLabel('Department').selectOption({ label: 'Sales' })
  await page.getByTestId('user-create').click()
  const alice = page.locator('[data-testid=user-table] tr[data-user=alice]')
  await alice.waitFor()
  if (await alice.getByTestId('user-dept').evaluate((el) => el.selectedOptions[0]?.textContent) !== 'Sales') fail('alice is not shown in Sales')
  await shot('admin-users')
  await page.getByTestId('tab-providers').click()
  const pf = page.getByTestId('provider-form')
  await pf.getByLabel('Provider id').fill('acme')
  await pf.getByLabel('Name', { exact: true }).fill('Acme AI')
  await pf.getByLabel('Base URL').fill('https://1.1.1.1/v1') // an IP literal: the SSRF guard resolves no name
  await pf.getByLabel('Models').fill('acme-chat, acme-mini')
  await page.getByTestId('provider-create').click()
  const acme = page.locator('[data-testid=provider-table] tr[data-provider=acme]')
  await acme.getByText('acme-chat, acme-mini').waitFor()
  await acme.getByRole('button', { name: 'Disable' }).click()
  await acme.getByText('Disabled').waitFor()
  await shot('admin-providers')
  await page.getByTestId('tab-settings').click()
  await page.locator('[data-setting=content_guard_keywords] textarea').fill('forbidden-one\nforbidden-two')
  await page.getByTestId('settings-save').click()
  await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor()
  const cfg = (await authed('/api/system/config', await bearer())).body
  if (JSON.stringify(cfg?.content_guard_keywords) !== '["forbidden-one","forbidden-two"]') fail('settings saved: ' + JSON.stringify(cfg))
  await shot('admin-settings')
  await page.getByRole('link', { name: 'Chat' }).click()

  // 15. Files: an HTML attachment from the composer (parsed to Markdown and
  // confirmed into the thread), sent with a message; the files panel's tree
  // reaches both files; Markdown renders, HTML shows in a sandboxed frame,
  // and the file downloads.
  log('files')
  await page.getByTestId('new-thread').click()
  await page.waitForURL('**/chat/*')
  await page.getByTestId('attach-input').setInputFiles(process.env.HTML_FILE)
  await page.getByTestId('attachments').getByText('budget').waitFor({ timeout: 30000 })
  await page.getByTestId('composer').fill('Summarize the attachment')
  await page.getByTestId('composer').press('Enter')
  await page.locator('[data-testid=msg-ai]').filter({ hasText: 'OK.' }).waitFor()
  await page.getByTestId('file-card').filter({ hasText: 'budget' }).waitFor()
  await page.reload() // the card comes back from the thread's attachments, bound to the message's request
  const fileCard = page.getByTestId('file-card').filter({ hasText: 'budget' })
  await fileCard.getByRole('button', { name: 'Open' }).click()
  const pv = page.getByTestId('file-preview')
  await pv.locator('.md').getByText('pangolin budget is 42').waitFor()
  const tree = page.getByTestId('file-tree')
  await tree.locator('button').first().waitFor()
  const target = tree.locator('button[data-path$="budget.md"]')
  for (let i = 0; i < 30 && !(await target.count()); i++) { // open folders one by one until the file shows
    const closed = tree.locator('button[aria-expanded=false]')
    if (!(await closed.count())) { await target.waitFor({ timeout: 3000 }).catch(() => {}); continue }
    const n = await tree.locator('li').count()
    await closed.first().click()
    await page.waitForFunction(([n]) => document.querySelectorAll('[data-testid=file-tree] li').length !== n ||
      !document.querySelector('[data-testid=file-tree] button[aria-expanded=false]'), [n], { timeout: 5000 }).catch(() => {})
  }
  await target.click()
  await pv.locator('.md').getByText('pangolin budget is 42').waitFor()
  await tree.locator('button[data-path$="budget.html"]').click()
  const frame = pv.getByTestId('html-frame')
  await frame.waitFor()
  if ((await frame.getAttribute('sandbox')) !== '') fail('the HTML preview frame is not sandboxed without permissions')
  await page.frameLocator('[data-testid=html-frame]').getByText('pangolin budget is 42').waitFor()
  await shot('files')
  const [dl] = await Promise.all([page.waitForEvent('download'), pv.getByTestId('file-download').click()])
  if (dl.suggestedFilename() !== 'budget.html') fail('download name: ' + dl.suggestedFilename())
  await page.getByRole('button', { name: 'Close' }).click()

  // 16. Keyboard only through chat: Tab to "New thread", Enter; Tab to the
  // composer, type, Enter sends; the answer arrives; Tab reaches the thread.
  log('keyboard chat')
  await page.getByTestId('new-thread').waitFor()
  await page.evaluate(() => { document.activeElement?.blur(); window.scrollTo(0, 0) })
  async function tabTo(testid, max = 40) {
    for (let i = 0; i < max; i++) {
      await page.keyboard.press('Tab')
      if (await page.evaluate((id) => document.activeElement?.getAttribute('data-testid') === id, testid)) return
    }
    fail(`Tab never reached ${testid}`)
  }
  await page.getByTestId('agent-pick').focus()
  await page.keyboard.press('Shift+Tab') // start from the element before the picker
  await tabTo('agent-pick')
  await tabTo('new-thread')
  const beforeKb = new URL(page.url()).pathname
  await page.keyboard.press('Enter')
  await page.waitForURL((u) => u.pathname !== beforeKb)
  await tabTo('composer')
  await page.keyboard.type('Hello by keyboard')
  await page.keyboard.press('Enter')
  await page.locator('[data-testid=msg-ai]').filter({ hasText: 'OK.' }).waitFor()
  await tabTo('thread-link')
  await shot('keyboard-chat')

  // 17. The language switch (zh) on the main screen.
  await page.getByTestId('lang').click()
  await page.getByRole('link', { name: '知识库' }).waitFor()
  await shot('chat-zh')
})
