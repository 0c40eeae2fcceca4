"""Drives the /deliveries page of a running worker in headless Chromium, as an operator would:
first with a wrong bearer token, then with the right one; prints what the page showed as JSON.

usage: deliveries_page.py URL TOKEN FIELD VALUE SCREENSHOT.png [LIMIT]

With LIMIT, the search asks for pages of LIMIT and "Older" is pressed while it shows, each
page's rows and status kept in "pages".
"""
import json
import sys

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

url, token, field, value, screenshot = sys.argv[1:6]
limit = sys.argv[6] if len(sys.argv) > 6 else None
options = Options()
for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,720"):
    options.add_argument(argument)
options.binary_location = "/usr/bin/chromium"
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
driver.set_page_load_timeout(60)
try:
    shown = {}
    driver.get(url + "/deliveries")
    shown["title"] = driver.title

    def search(bearer):
        box = driver.find_element(By.ID, "bearer")
        box.clear()
        box.send_keys(bearer)
        Select(driver.find_element(By.ID, "field")).select_by_value(field)
        entry = driver.find_element(By.ID, "value")
        entry.clear()
        entry.send_keys(value)
        if limit:
            box = driver.find_element(By.ID, "limit")
            box.clear()
            box.send_keys(limit)
        before = driver.find_element(By.ID, "status").text
        driver.find_element(By.ID, "go").click()
        # The page says "Searching…", then the answer.
        WebDriverWait(driver, 60).until(lambda d: d.find_element(By.ID, "status").text not in (before, "Searching…"))
        status = driver.find_element(By.ID, "status")
        return status.text, status.get_attribute("class")

    shown["refused"], shown["refused_class"] = search("not-the-token-at-all")
    shown["status"], shown["status_class"] = search(token)
    shown["rows"] = [
        [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        for row in driver.find_elements(By.CSS_SELECTOR, "#results tbody tr")
    ]
    shown["row_classes"] = [row.get_attribute("class") for row in driver.find_elements(By.CSS_SELECTOR, "#results tbody tr")]
    if limit:
        def rows():
            return [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")] for row in driver.find_elements(By.CSS_SELECTOR, "#results tbody tr")]

        shown["pages"] = [{"rows": shown["rows"], "status": shown["status"]}]
        older = driver.find_element(By.ID, "older")
        while older.is_displayed() and len(shown["pages"]) < 20:
            before = driver.find_element(By.ID, "status").text
            older.click()
            WebDriverWait(driver, 60).until(lambda d: d.find_element(By.ID, "status").text not in (before, "Searching…"))
            shown["pages"].append({"rows": rows(), "status": driver.find_element(By.ID, "status").text})
    driver.save_screenshot(screenshot)
    print(json.dumps(shown))
finally:
    driver.quit()
