// Light/dark: the user's choice (localStorage) or the system preference;
// applied as the `dark` class on <html>, which switches every token.
import { ref } from 'vue'

function initial(): boolean {
  const saved = localStorage.getItem('yuxi.theme')
  if (saved) return saved === 'dark'
  return window.matchMedia?.('(prefers-color-scheme: dark)').matches ?? false
}

export const dark = ref(initial())
document.documentElement.classList.toggle('dark', dark.value)

export function toggleTheme() {
  dark.value = !dark.value
  localStorage.setItem('yuxi.theme', dark.value ? 'dark' : 'light')
  document.documentElement.classList.toggle('dark', dark.value)
}
